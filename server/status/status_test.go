package status

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quiver-ingest/quiver/server/endpoint"
	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
)

// TestRecorderBounds: a recorder keeps the last commits and error
// messages only, counts every error of the last hour, and forgets older
// ones.
func TestRecorderBounds(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	r := NewRecorder(func() time.Time { return now })
	for i := range 25 {
		r.Committed(endpoint.Commit{Key: writers.TxnKey{Writer: "w", Epoch: int64(i)}, Info: writers.CommitInfo{Version: int64(i)}, Rows: 1, At: now})
	}
	for range 1000 {
		r.Failed("write", errors.New(strings.Repeat("x", 5000)))
	}
	commits, errs, n := r.view(now)
	if len(commits) != keepCommits || commits[0].Version != 24 || commits[0].Writer != "w" {
		t.Errorf("commits: %d, newest %+v", len(commits), commits[0])
	}
	if len(errs) != keepErrors || n != 1000 || len(errs[0].Message) > maxMessage+3 {
		t.Errorf("errors: kept %d, counted %d, message of %d bytes", len(errs), n, len(errs[0].Message))
	}
	later := now.Add(61 * time.Minute)
	if _, errs, n := r.view(later); len(errs) != 0 || n != 0 {
		t.Errorf("an hour later: %d errors shown, %d counted", len(errs), n)
	}
}

// TestSamplerRates: points are the counters' growth per second between
// samples, a counter that restarted counts from zero, and the ring keeps
// the window.
func TestSamplerRates(t *testing.T) {
	s := newSampler([]string{"e"}, 3)
	t0 := time.Unix(100, 0)
	s.add(t0, map[string]counts{"e": {rows: 100, bytes: 1000}})
	s.add(t0.Add(10*time.Second), map[string]counts{"e": {rows: 200, bytes: 3000}})
	s.add(t0.Add(20*time.Second), map[string]counts{"e": {rows: 50, bytes: 500}})
	p := s.points("e")
	if len(p) != 2 || p[0].RowsPerSec != 10 || p[0].BytesPerSec != 200 || p[1].RowsPerSec != 5 {
		t.Fatalf("points: %+v", p)
	}
	for i := range 5 {
		s.add(t0.Add(time.Duration(30+10*i)*time.Second), map[string]counts{"e": {rows: 50}})
	}
	if p := s.points("e"); len(p) != 3 || !p[2].At.Equal(t0.Add(70*time.Second)) {
		t.Errorf("ring: %+v", p)
	}
}

// TestSnapshot: endpoints carry their registry counters and state, the
// memory its budget's gauges summed over kinds, hidden
// endpoints and the transactions touching them are left out, and a
// precommitted transaction older than StuckAfter is stuck.
func TestSnapshot(t *testing.T) {
	reg := prometheus.NewRegistry()
	rows := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quiver_rows_total"}, []string{"endpoint"})
	streams := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "quiver_streams_active"}, []string{"endpoint"})
	mem := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "quiver_memory_bytes"}, []string{"kind"})
	limit := prometheus.NewGauge(prometheus.GaugeOpts{Name: "quiver_memory_limit_bytes"})
	reg.MustRegister(rows, streams, mem, limit)
	mem.WithLabelValues("received").Set(100)
	mem.WithLabelValues("staging").Set(20)
	limit.Set(1000)
	rows.WithLabelValues("a").Add(42)
	streams.WithLabelValues("a").Set(2)
	now := time.Unix(1_700_000_000, 0)
	b := New(Options{
		Version: "v1", Started: now.Add(-time.Hour), Gatherer: reg, Now: func() time.Time { return now },
		Endpoints: []Endpoint{
			{Name: "a", Sink: "discard", Reason: func() error { return nil }},
			{Name: "b", Sink: "delta", Reason: func() error { return errors.New("down") }},
		},
		Transactions: func() []txn.Status {
			return []txn.Status{
				{Writer: "old", Epoch: 1, State: txn.StatePrecommitted, Since: now.Add(-10 * time.Minute), Participants: []txn.Participant{{Endpoint: "a", Rows: 5}}},
				{Writer: "new", Epoch: 2, State: txn.StateOpen, Since: now.Add(-time.Hour), Participants: []txn.Participant{{Endpoint: "a"}}},
				{Writer: "other", Epoch: 3, State: txn.StatePrecommitted, Since: now, Participants: []txn.Participant{{Endpoint: "a"}, {Endpoint: "b"}}},
			}
		},
		Journal: func() error { return nil },
	})
	st := b.Snapshot(View{})
	if st.UptimeSeconds != 3600 || len(st.Endpoints) != 2 || st.Endpoints[0].Rows != 42 || st.Endpoints[0].Streams != 2 ||
		st.Endpoints[1].State != "degraded" || st.Endpoints[1].Reason != "down" || len(st.Transactions) != 3 {
		t.Fatalf("snapshot: %+v", st)
	}
	if st.Memory.ChargedBytes != 120 || st.Memory.BudgetBytes != 1000 {
		t.Errorf("memory: %+v", st.Memory)
	}
	if !st.Transactions[0].Stuck || st.Transactions[1].Stuck || st.Transactions[2].Stuck || st.Transactions[0].Rows != 5 {
		t.Errorf("stuck flags: %+v", st.Transactions)
	}
	only := b.Snapshot(View{Endpoint: func(ep string) bool { return ep == "a" }})
	if len(only.Endpoints) != 1 || len(only.Transactions) != 2 {
		t.Errorf("visible a only: %+v", only)
	}
}

// TestHandler: the page and its assets are served with a policy allowing
// nothing outside the server, the page references only its own assets,
// and /api/status asks for a token when auth refuses.
func TestHandler(t *testing.T) {
	b := New(Options{Version: "v1"})
	h := b.Handler(func(r *http.Request) (View, bool) {
		return View{}, r.Header.Get("Authorization") == "Bearer ok"
	})
	get := func(path, auth string) *http.Response {
		req := httptest.NewRequest("GET", path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Result()
	}
	page := get("/", "")
	body, _ := io.ReadAll(page.Body)
	if page.StatusCode != 200 || !strings.Contains(page.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Errorf("page: %d %v", page.StatusCode, page.Header)
	}
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(string(body), -1) {
		if !strings.HasPrefix(m[1], "/assets/") && !strings.HasPrefix(m[1], "data:") {
			t.Errorf("the page references %q", m[1])
		}
		if strings.HasPrefix(m[1], "/assets/") && get(m[1], "").StatusCode != 200 {
			t.Errorf("%s is not served", m[1])
		}
	}
	if r := get("/api/status", ""); r.StatusCode != 401 || r.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("no token: %d", r.StatusCode)
	}
	if r := get("/api/status", "Bearer ok"); r.StatusCode != 200 || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("token: %d", r.StatusCode)
	}
}

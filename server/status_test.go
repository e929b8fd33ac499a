package server

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/internal/testpoll"
	"github.com/quiver-ingest/quiver/server/status"
)

// getStatus fetches /api/status with token ("" for none), returning the
// HTTP code and, on 200, the decoded status.
func getStatus(t *testing.T, s *testServer, token string) (int, status.Status) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", "http://"+s.HTTPAddr()+"/api/status", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st status.Status
	if resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, st
}

func endpointOf(t *testing.T, st status.Status, name string) status.EndpointSt {
	t.Helper()
	for _, e := range st.Endpoints {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("/api/status has no endpoint %q: %+v", name, st.Endpoints)
	return status.EndpointSt{}
}

// TestStatusAPI: /api/status shows every endpoint with its sink, target and
// state (a degraded one with its reason and the failed open among its
// errors), the rows and last commit of each after puts, the throughput
// sampled over time, and a precommitted transaction flagged stuck.
func TestStatusAPI(t *testing.T) {
	dir := t.TempDir()
	corruptDeltaTable(t, dir, "broken")
	s := startServerWith(t, dir, `endpoints:
  - {name: devnull, sink: discard}
  - {name: events, sink: delta, delta: {table_uri: "file://tables/events"}}
  - {name: broken, sink: delta, delta: {table_uri: "file://tables/broken"}}
`, Options{EndpointRetryMin: time.Hour, StatusSampleEvery: 20 * time.Millisecond, StatusStuckAfter: time.Nanosecond})
	c := dialClient(t, s)
	ctx := t.Context()
	if _, err := c.Put(ctx, "devnull", idReader(t, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "events", idReader(t, 7)); err != nil {
		t.Fatal(err)
	}
	precommitOn(t, c, 3) // job@1 on devnull, left precommitted

	_, st := getStatus(t, s, "")
	if st.Version != "v-test" || st.State != "serving" || st.Journal != "ok" || st.Memory.ProcessBytes == 0 || st.Memory.HeapBytes == 0 {
		t.Errorf("server part: %+v", st)
	}
	if len(st.Endpoints) != 3 {
		t.Fatalf("endpoints: %+v", st.Endpoints)
	}
	dn := endpointOf(t, st, "devnull")
	if dn.Sink != "discard" || dn.State != "ok" || dn.Rows != 8 || len(dn.Commits) != 1 || dn.Commits[0].Rows != 5 || dn.Commits[0].Version != -1 || dn.Commits[0].Writer != "" {
		t.Errorf("devnull: %+v", dn)
	}
	ev := endpointOf(t, st, "events")
	wantTarget := "file://" + filepath.Join(dir, "tables", "events")
	if ev.Sink != "delta" || ev.Mode != "append" || !strings.HasPrefix(ev.Target, "file://") || !strings.HasSuffix(ev.Target, "tables/events") || ev.State != "ok" {
		t.Errorf("events: %+v (want target %s)", ev, wantTarget)
	}
	if ev.Rows != 7 || len(ev.Commits) != 1 || ev.Commits[0].Version != 0 || ev.Commits[0].Rows != 7 || ev.Commits[0].DurationMs <= 0 {
		t.Errorf("events commits: %+v", ev.Commits)
	}
	br := endpointOf(t, st, "broken")
	if br.State != "degraded" || !strings.Contains(br.Reason, "corrupt delta log") || br.ErrorsHour < 1 || len(br.Errors) < 1 || br.Errors[0].Op != "open" {
		t.Errorf("broken: %+v", br)
	}
	if len(st.Transactions) != 1 {
		t.Fatalf("transactions: %+v", st.Transactions)
	}
	if tx := st.Transactions[0]; tx.Writer != "job" || tx.Epoch != 1 || tx.State != "precommitted" || tx.Rows != 3 || !tx.Stuck || tx.AgeSecs <= 0 || tx.Endpoints[0] != "devnull" {
		t.Errorf("transaction: %+v", tx)
	}
	// The throughput chart: a sample after the puts saw rows arrive.
	testpoll.Until(t, "a throughput point with rows", func() bool {
		_, st := getStatus(t, s, "")
		for _, p := range endpointOf(t, st, "events").Throughput {
			if p.RowsPerSec > 0 && p.BytesPerSec > 0 {
				return true
			}
		}
		// Puts after the first sample show in a later one.
		if _, err := c.Put(ctx, "events", idReader(t, 1)); err != nil {
			t.Fatal(err)
		}
		return false
	})
}

// TestStatusAPIToken: with auth, /api/status needs a token of auth.tokens
// and shows only that token's endpoints (and the transactions on them);
// the page itself holds no data and needs none. http.metrics_auth guards
// /metrics the same way.
func TestStatusAPIToken(t *testing.T) {
	t.Setenv("QUIVER_TEST_STATUS_TOKEN", "s3cret")
	t.Setenv("QUIVER_TEST_STATUS_ADMIN", "admin")
	s := startServer(t, twoEndpoints+`auth:
  tokens:
    - {name: ingest, token_env: QUIVER_TEST_STATUS_TOKEN, endpoints: [devnull], actions: []}
    - {name: admin, token_env: QUIVER_TEST_STATUS_ADMIN, endpoints: ["*"], actions: ["*"]}
http: {metrics_auth: true}
`)
	for _, tok := range []string{"", "guess"} {
		if code, _ := getStatus(t, s, tok); code != http.StatusUnauthorized {
			t.Errorf("token %q: %d, want 401", tok, code)
		}
	}
	if code, st := getStatus(t, s, "s3cret"); code != 200 || len(st.Endpoints) != 1 || st.Endpoints[0].Name != "devnull" {
		t.Errorf("ingest token: %d %+v, want devnull only", code, st.Endpoints)
	}
	if code, st := getStatus(t, s, "admin"); code != 200 || len(st.Endpoints) != 2 {
		t.Errorf("admin token: %d %+v, want both endpoints", code, st.Endpoints)
	}
	if code, body := httpGet(t, "http://"+s.HTTPAddr()+"/"); code != 200 || !strings.Contains(body, "Quiver status") {
		t.Errorf("page without token: %d", code)
	}
	if code, _ := httpGet(t, "http://"+s.HTTPAddr()+"/metrics"); code != http.StatusUnauthorized {
		t.Errorf("/metrics without token: %d, want 401", code)
	}
	req, _ := http.NewRequest("GET", "http://"+s.HTTPAddr()+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("/metrics with token: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestPprofOptIn: /debug/pprof/ is absent by default; http.pprof serves
// it, with auth only to a token granting every endpoint, and profiles
// that run for a while are bounded.
func TestPprofOptIn(t *testing.T) {
	off := startServer(t, twoEndpoints)
	if code, _ := httpGet(t, "http://"+off.HTTPAddr()+"/debug/pprof/heap"); code != http.StatusNotFound {
		t.Errorf("pprof by default: %d, want 404", code)
	}
	on := startServer(t, twoEndpoints+"http: {pprof: true}\n")
	if code, body := httpGet(t, "http://"+on.HTTPAddr()+"/debug/pprof/heap?debug=1"); code != 200 || !strings.Contains(body, "heap profile") {
		t.Errorf("pprof on: %d %.80q, want 200 with a heap profile", code, body)
	}
	for _, path := range []string{"/debug/pprof/profile?seconds=61", "/debug/pprof/trace?seconds=3600", "/debug/pprof/heap?seconds=0"} {
		if code, _ := httpGet(t, "http://"+on.HTTPAddr()+path); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", path, code)
		}
	}

	t.Setenv("QUIVER_TEST_PPROF_ADMIN", "admin")
	t.Setenv("QUIVER_TEST_PPROF_INGEST", "ingest")
	guarded := startServer(t, twoEndpoints+`auth:
  tokens:
    - {name: ops, token_env: QUIVER_TEST_PPROF_ADMIN, endpoints: ["*"], actions: []}
    - {name: ingest, token_env: QUIVER_TEST_PPROF_INGEST, endpoints: [devnull], actions: ["*"]}
http: {pprof: true}
`)
	get := func(path, token string) int {
		req, _ := http.NewRequest("GET", "http://"+guarded.HTTPAddr()+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/heap", "/debug/pprof/cmdline",
		"/debug/pprof/profile?seconds=1", "/debug/pprof/symbol", "/debug/pprof/trace?seconds=1"} {
		for token, want := range map[string]int{"": http.StatusUnauthorized, "ingest": http.StatusUnauthorized, "admin": http.StatusOK} {
			if got := get(path, token); got != want {
				t.Errorf("%s with token %q: %d, want %d", path, token, got, want)
			}
		}
	}
}

// An empty transaction touches no endpoint, so /api/status used to show
// the admin's w@3 to every token. A token now sees only its own
// transactions; an admin token sees all.
func TestStatusAPIShowsOwnTransactions(t *testing.T) {
	t.Setenv("QUIVER_TEST_STATUS_LOW", "low-s3cret")
	t.Setenv("QUIVER_TEST_STATUS_ADMIN", "admin")
	s := startServer(t, twoEndpoints+`auth:
  tokens:
    - {name: low, token_env: QUIVER_TEST_STATUS_LOW, endpoints: [devnull], actions: [begin]}
    - {name: admin, token_env: QUIVER_TEST_STATUS_ADMIN, endpoints: ["*"], actions: ["*"]}
`)
	for tok, writer := range map[string]string{"admin": "w", "low-s3cret": "mine"} {
		c, err := quiver.Dial(s.FlightAddr(), quiver.WithToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Begin(t.Context(), writer, 3, 0); err != nil {
			t.Fatalf("begin %s@3: %v", writer, err)
		}
	}
	writers := func(st status.Status) []string {
		var out []string
		for _, tx := range st.Transactions {
			out = append(out, tx.Writer)
		}
		slices.Sort(out)
		return out
	}
	if _, st := getStatus(t, s, "low-s3cret"); !slices.Equal(writers(st), []string{"mine"}) {
		t.Errorf("token low sees transactions %v, want only its own [mine]", writers(st))
	}
	if _, st := getStatus(t, s, "admin"); !slices.Equal(writers(st), []string{"mine", "w"}) {
		t.Errorf("the admin sees transactions %v, want [mine w]", writers(st))
	}
}

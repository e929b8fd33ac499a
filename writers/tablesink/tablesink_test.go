package tablesink

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/storage"
)

func newCommit(max int) Commit {
	return Commit{Sink: "test", Endpoint: "e", Key: writers.TxnKey{Writer: "w", Epoch: 1}, MaxReplans: max,
		Commits:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "commits"}, []string{"result"}),
		Conflicts: prometheus.NewCounter(prometheus.CounterOpts{Name: "conflicts"}),
		Replans:   prometheus.NewCounter(prometheus.CounterOpts{Name: "replans"}),
		Log:       slog.New(slog.DiscardHandler)}
}

func TestLoop(t *testing.T) {
	conflict := writers.Errorf(writers.ErrConflict, "lost")
	tests := []struct {
		name     string
		errs     []error // one per attempt; past the end: committed
		wantErr  error
		attempts int
		result   string
		replans  float64
	}{
		{"committed", nil, nil, 1, "committed", 0},
		{"conflicts planned again", []error{conflict, conflict}, nil, 3, "committed", 2},
		{"too many conflicts", []error{conflict, conflict, conflict, conflict}, writers.ErrConflict, 3, "failed", 2},
		{"final conflict", []error{Final(conflict)}, writers.ErrConflict, 1, "failed", 0},
		{"other error", []error{writers.Errorf(writers.ErrInvalid, "bad")}, writers.ErrInvalid, 1, "failed", 0},
		{"outcome unknown", []error{Final(writers.Errorf(writers.ErrOutcomeUnknown, "lost answer"))}, writers.ErrOutcomeUnknown, 1, "failed", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCommit(2)
			n := 0
			info, err := c.Loop(context.Background(), func(_ context.Context, replan int) (writers.CommitInfo, Result, error) {
				if replan != n {
					t.Errorf("attempt %d told replan %d", n, replan)
				}
				n++
				if n <= len(tt.errs) {
					return writers.CommitInfo{}, 0, tt.errs[n-1]
				}
				return writers.CommitInfo{Version: 7}, Committed, nil
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			var f finalError
			if errors.As(err, &f) {
				t.Errorf("Loop returned the Final wrapper: %v", err)
			}
			var unknown *writers.OutcomeUnknownError
			if errors.Is(tt.wantErr, writers.ErrOutcomeUnknown) && (!errors.As(err, &unknown) || unknown.Endpoint != "e" || unknown.Key != c.Key) {
				t.Errorf("outcome unknown not wrapped with endpoint and key: %#v", err)
			}
			if err == nil && info.Version != 7 {
				t.Errorf("info %+v", info)
			}
			if n != tt.attempts {
				t.Errorf("%d attempts, want %d", n, tt.attempts)
			}
			if got := testutil.ToFloat64(c.Commits.WithLabelValues(tt.result)); got != 1 {
				t.Errorf("commits{%s} = %v, want 1", tt.result, got)
			}
			if got := testutil.ToFloat64(c.Replans); got != tt.replans {
				t.Errorf("replans = %v, want %v", got, tt.replans)
			}
		})
	}
}

func TestLoopUncounted(t *testing.T) {
	c := newCommit(2)
	if _, err := c.Loop(context.Background(), func(context.Context, int) (writers.CommitInfo, Result, error) {
		return writers.CommitInfo{Version: writers.NoVersion}, Uncounted, nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c.Commits); n != 0 {
		t.Errorf("an uncounted call counted %d series", n)
	}
}

type testStage struct{ files []string }

func TestStages(t *testing.T) {
	var discarded []string
	r := NewStages("test", func(_ context.Context, s *testStage) error {
		discarded = append(discarded, s.files...)
		return nil
	})
	key := writers.TxnKey{Writer: "w", Epoch: 1}
	if s, err := r.Get(key, false); s != nil || err != nil {
		t.Fatalf("Get without create: %v, %v", s, err)
	}
	s, err := r.Get(key, true)
	if err != nil {
		t.Fatal(err)
	}
	s.files = []string{"a"}
	if again, _ := r.Get(key, true); again != s {
		t.Fatal("Get made a second stage for a key")
	}
	if err := r.Rollback(context.Background(), key); err != nil || len(discarded) != 1 {
		t.Fatalf("Rollback: %v, discarded %v", err, discarded)
	}
	if err := r.Rollback(context.Background(), key); err != nil || len(discarded) != 1 {
		t.Fatalf("second Rollback: %v, discarded %v", err, discarded)
	}
	other := writers.TxnKey{Writer: "w", Epoch: 2}
	s, _ = r.Get(other, true)
	s.files = []string{"b"}
	if !r.IfOpen(func() {}) {
		t.Fatal("IfOpen refused an open registry")
	}
	ctx := context.Background()
	bucket, err := storage.Open(ctx, "mem://quiver-tablesink-test/stages", storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stops, released := 0, 0
	closeWriter := func() error {
		return r.CloseWriter(ctx, bucket, func() { stops++ }, func() { released++ })
	}
	if err := closeWriter(); err != nil || stops != 1 || released != 1 || len(discarded) != 2 {
		t.Fatalf("CloseWriter: %v, %d stops, %d releases, discarded %v; want each once, both stages", err, stops, released, discarded)
	}
	if err := closeWriter(); err != nil || stops != 1 || released != 1 {
		t.Errorf("second CloseWriter: %v, %d stops, %d releases; want nothing more", err, stops, released)
	}
	if _, err := r.Get(other, true); !errors.Is(err, writers.ErrWrongState) {
		t.Errorf("Get after CloseWriter: %v, want ErrWrongState", err)
	}
	if r.IfOpen(func() { t.Error("ran after CloseWriter") }) {
		t.Error("IfOpen ran after CloseWriter")
	}
}

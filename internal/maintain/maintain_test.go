package maintain

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/discard"
)

// table is a writer with maintenance that counts its runs and notices
// overlapping ones.
type table struct {
	*discard.Writer
	running, overlaps, optimizes, vacuums atomic.Int64
	retention                             atomic.Int64
}

func (t *table) enter() func() {
	if t.running.Add(1) > 1 {
		t.overlaps.Add(1)
	}
	time.Sleep(time.Millisecond) // a slow table: overlapping runs would meet here
	return func() { t.running.Add(-1) }
}

func (t *table) Optimize(context.Context, writers.OptimizeRequest) (writers.OptimizeResult, error) {
	defer t.enter()()
	t.optimizes.Add(1)
	return writers.OptimizeResult{FilesRemoved: 2, FilesAdded: 1}, nil
}

func (t *table) Vacuum(_ context.Context, req writers.VacuumRequest) (writers.VacuumResult, error) {
	defer t.enter()()
	t.vacuums.Add(1)
	t.retention.Store(int64(req.Retention))
	return writers.VacuumResult{FilesDeleted: 2}, nil
}

func newRunner(t *testing.T, w writers.Writer, cfg writers.Maintenance, lim Limiter) (*Runner, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	all := writers.MaintenanceOps{Optimize: true, Vacuum: true}
	r, err := New(Options{Endpoint: "e", Writer: w, Ops: all, Config: cfg, Limiter: lim, Registerer: reg, UntrackedMinAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return r, reg
}

// TestRunner: retention defaults and the minimum, one run at a time
// across runners sharing a limiter, metrics, and a sink without
// maintenance.
func TestRunner(t *testing.T) {
	ctx := context.Background()
	tbl := &table{Writer: discard.New(nil)}
	cfg := writers.NewMaintenance()
	lim := NewLimiter()
	r1, reg := newRunner(t, tbl, cfg, lim)
	r2, _ := newRunner(t, tbl, cfg, lim)

	if _, err := r1.Vacuum(ctx, nil, false); err != nil || time.Duration(tbl.retention.Load()) != cfg.VacuumRetention {
		t.Fatalf("vacuum without retention: %v, retention %s, want %s", err, time.Duration(tbl.retention.Load()), cfg.VacuumRetention)
	}
	short := time.Hour
	if _, err := r1.Vacuum(ctx, &short, false); !errors.Is(err, writers.ErrInvalid) || tbl.vacuums.Load() != 1 {
		t.Fatalf("vacuum below the minimum: %v (vacuums %d), want ErrInvalid before the sink", err, tbl.vacuums.Load())
	}
	done := make(chan struct{})
	for _, r := range []*Runner{r1, r2, r1, r2} {
		go func() {
			r.Optimize(ctx, nil)
			done <- struct{}{}
		}()
	}
	for range 4 {
		<-done
	}
	if tbl.overlaps.Load() != 0 {
		t.Fatalf("%d maintenance runs overlapped", tbl.overlaps.Load())
	}
	if got := testutil.ToFloat64(r1.m.runs.WithLabelValues("optimize", "ok")); got != 2 {
		t.Errorf("runs{optimize,ok} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(r1.m.files.WithLabelValues("vacuum", "deleted")); got != 2 {
		t.Errorf("files{vacuum,deleted} = %v, want 2", got)
	}
	if n, err := testutil.GatherAndCount(reg, "quiver_maintenance_runs_total"); err != nil || n == 0 {
		t.Errorf("quiver_maintenance_runs_total not registered: %d, %v", n, err)
	}

	plain, _ := newRunner(t, discard.New(nil), cfg, nil)
	if _, err := plain.Optimize(ctx, nil); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("optimize of a sink without maintenance: %v, want ErrInvalid", err)
	}
}

// TestRunnerBackground: optimize_every counts commits and runs optimize
// then vacuum; off, Run returns at once.
func TestRunnerBackground(t *testing.T) {
	tbl := &table{Writer: discard.New(nil)}
	cfg := writers.NewMaintenance()
	off, _ := newRunner(t, tbl, cfg, nil)
	off.Run(t.Context()) // returns: optimize_every is off

	cfg.OptimizeEvery = writers.Every{Commits: 3}
	r, _ := newRunner(t, tbl, cfg, nil)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() {
		r.Run(ctx)
		close(ran)
	}()
	r.Committed()
	r.Committed()
	// Run starts maintenance only on a kick (or the interval, off here).
	if len(r.kick) != 0 || tbl.optimizes.Load() != 0 {
		t.Fatal("maintenance triggered before optimize_every commits")
	}
	r.Committed()
	deadline := time.Now().Add(10 * time.Second)
	for tbl.vacuums.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no background optimize and vacuum after 3 commits")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if tbl.optimizes.Load() != 1 {
		t.Errorf("optimizes = %d, want 1", tbl.optimizes.Load())
	}
	cancel()
	<-ran
}

// TestRunnerUnsupportedOps: an operation the sink does not support (here
// optimize) is refused before any run, naming what is supported, and
// background maintenance runs only the supported ones: no failed optimize
// at every trigger.
func TestRunnerUnsupportedOps(t *testing.T) {
	tbl := &table{Writer: discard.New(nil)}
	cfg := writers.NewMaintenance()
	cfg.OptimizeEvery = writers.Every{Commits: 1}
	r, err := New(Options{Endpoint: "e", Writer: tbl, Ops: writers.MaintenanceOps{Vacuum: true}, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Optimize(t.Context(), nil); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "supports vacuum") {
		t.Fatalf("optimize = %v, want ErrInvalid naming vacuum", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() {
		r.Run(ctx)
		close(ran)
	}()
	r.Committed()
	deadline := time.Now().Add(10 * time.Second)
	for tbl.vacuums.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no background vacuum after a commit")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-ran
	if n, failed := tbl.optimizes.Load(), testutil.ToFloat64(r.m.runs.WithLabelValues("optimize", "failed")); n != 0 || failed != 0 {
		t.Errorf("optimize reached the sink %d times, %v failed runs counted; want none", n, failed)
	}
}

func TestEvery(t *testing.T) {
	for in, want := range map[string]writers.Every{"": {}, "off": {}, "0": {}, "100": {Commits: 100}, "15m": {Interval: 15 * time.Minute}} {
		var e writers.Every
		if err := e.UnmarshalText([]byte(in)); err != nil || e != want {
			t.Errorf("%q: %+v, %v; want %+v", in, e, err, want)
		}
	}
	for _, in := range []string{"-1", "often", "-5m"} {
		var e writers.Every
		if err := e.UnmarshalText([]byte(in)); err == nil {
			t.Errorf("%q accepted as %+v", in, e)
		}
	}
}

// brittle is a table whose optimize panics, as a sink reading a table
// another process wrote may.
type brittle struct{ table }

func (b *brittle) Optimize(context.Context, writers.OptimizeRequest) (writers.OptimizeResult, error) {
	panic("index out of range reading the table")
}

// TestRunnerPanicIsAFailedRun: a sink panicking in a run (background runs
// have no gRPC recovery) is a failed run, logged and counted; the vacuum
// after it still runs.
func TestRunnerPanicIsAFailedRun(t *testing.T) {
	tbl := &brittle{table{Writer: discard.New(nil)}}
	r, _ := newRunner(t, tbl, writers.NewMaintenance(), nil)
	if _, err := r.Optimize(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "index out of range") {
		t.Fatalf("optimize that panics: %v, want the panic as the error", err)
	}
	if _, err := r.Vacuum(t.Context(), nil, false); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(r.m.runs.WithLabelValues("optimize", "failed")); got != 1 {
		t.Errorf("runs{optimize,failed} = %v, want 1", got)
	}
}

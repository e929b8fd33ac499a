package txn

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"go.uber.org/goleak"

	"github.com/quiver-ingest/quiver/writers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeWriter is a sink that stores committed epochs like a real one, records
// the coordinator's calls and fails on demand.
type fakeWriter struct {
	name string

	mu          sync.Mutex
	committed   map[string]int64 // writer → last committed epoch
	versionOf   map[writers.TxnKey]int64
	version     int64
	precommits  []writers.TxnKey
	commits     []fakeCommit
	keeps       []fakeCommit // KeepPrecommitted calls
	rollbacks   []writers.TxnKey
	discarded   []writers.Descriptor // DiscardPrecommitted calls that succeeded
	failDiscard error                // returned by DiscardPrecommitted, until reset
	epochCalls  int
	// Injected failures, returned until reset.
	failPrecommit, failCommit, failRollback error
	// failCheck is returned by CheckDescriptors, until reset.
	failCheck error
	checks    int
	// Injected panics, until reset.
	panicPrecommit, panicCommit bool
	// onCommit runs at the start of every Commit, until reset.
	onCommit func()
	// single: the sink publishes one descriptor per commit (upsert).
	single bool
	// target is the table it writes (writers.Targeted); "": its own.
	target string
}

func (f *fakeWriter) Target() string {
	if f.target != "" {
		return f.target
	}
	return "fake " + f.name
}

type fakeCommit struct {
	key   writers.TxnKey
	descs []writers.Descriptor
}

var (
	_ writers.Writer             = (*fakeWriter)(nil)
	_ writers.DescriptorChecker  = (*fakeWriter)(nil)
	_ writers.PrecommitKeeper    = (*fakeWriter)(nil)
	_ writers.PrecommitDiscarder = (*fakeWriter)(nil)
	_ writers.Targeted           = (*fakeWriter)(nil)
)

func newFake(name string) *fakeWriter {
	return &fakeWriter{name: name, committed: map[string]int64{}, versionOf: map[writers.TxnKey]int64{}}
}

func (f *fakeWriter) desc(key writers.TxnKey) writers.Descriptor {
	return writers.Descriptor(fmt.Sprintf("%s/%s", f.name, key))
}

func (f *fakeWriter) Open(context.Context) error  { return nil }
func (f *fakeWriter) Close(context.Context) error { return nil }
func (f *fakeWriter) Write(context.Context, writers.TxnKey, arrow.RecordBatch) error {
	return nil
}

func (f *fakeWriter) Precommit(_ context.Context, key writers.TxnKey) (writers.Descriptor, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.panicPrecommit {
		panic("injected precommit panic")
	}
	if f.failPrecommit != nil {
		return nil, f.failPrecommit
	}
	f.precommits = append(f.precommits, key)
	return f.desc(key), nil
}

func (f *fakeWriter) Commit(_ context.Context, key writers.TxnKey, descs []writers.Descriptor) (writers.CommitInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.onCommit != nil {
		f.onCommit()
	}
	if f.panicCommit {
		panic("injected commit panic")
	}
	if f.failCommit != nil {
		return writers.CommitInfo{}, f.failCommit
	}
	if e, ok := f.committed[key.Writer]; ok && key.Epoch <= e {
		return writers.CommitInfo{Version: f.versionOf[key], Replayed: true}, nil
	}
	f.version++
	f.committed[key.Writer] = key.Epoch
	f.versionOf[key] = f.version
	f.commits = append(f.commits, fakeCommit{key, descs})
	return writers.CommitInfo{Version: f.version}, nil
}

func (f *fakeWriter) CheckDescriptors(context.Context, writers.TxnKey, []writers.Descriptor) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks++
	return f.failCheck
}

func (f *fakeWriter) KeepPrecommitted(key writers.TxnKey, descs []writers.Descriptor) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keeps = append(f.keeps, fakeCommit{key, descs})
}

func (f *fakeWriter) Rollback(_ context.Context, key writers.TxnKey) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failRollback != nil {
		return f.failRollback
	}
	f.rollbacks = append(f.rollbacks, key)
	return nil
}

func (f *fakeWriter) DiscardPrecommitted(_ context.Context, desc writers.Descriptor) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failDiscard != nil {
		return f.failDiscard
	}
	f.discarded = append(f.discarded, desc)
	return nil
}

func (f *fakeWriter) CommittedEpoch(_ context.Context, writer string) (int64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.epochCalls++
	e, ok := f.committed[writer]
	return e, ok, nil
}

func (f *fakeWriter) Contract() writers.Contract {
	f.mu.Lock()
	defer f.mu.Unlock()
	return writers.Contract{Delivery: "exactly-once", AggregatesDescriptors: !f.single, Rewrites: f.single}
}
func (f *fakeWriter) Check(context.Context) error { return nil }

func (f *fakeWriter) set(fn func(f *fakeWriter)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeWriter) counts() (precommits, commits, rollbacks, epochCalls int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.precommits), len(f.commits), len(f.rollbacks), f.epochCalls
}

// fakeEndpoints maps endpoint names to fake writers, which it hands out
// wrapped as the server does (see wrapped).
type fakeEndpoints map[string]*fakeWriter

func (e fakeEndpoints) Writer(name string) (writers.Writer, bool) {
	w, ok := e[name]
	if !ok {
		return nil, false
	}
	return wrapped{w}, true
}

// wrapped stands for the server's endpoint wrapper: it has only the
// writers.Writer methods, and Unwrap, so the coordinator must find the
// optional interfaces through writers.Find.
type wrapped struct{ writers.Writer }

func (w wrapped) Unwrap() writers.Writer { return w.Writer }

func newEndpoints(names ...string) fakeEndpoints {
	e := fakeEndpoints{}
	for _, n := range names {
		e[n] = newFake(n)
	}
	return e
}

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixture is one coordinator on a directory, reopenable.
type fixture struct {
	t     *testing.T
	dir   string
	eps   fakeEndpoints
	clock *clock
	tune  func(*Coordinator)
	// attempts numbers the attempt ids of the fixture's coordinators.
	attempts atomic.Int64
	c        *Coordinator
	fillers  int64 // fillUntilCompacted calls
}

func newFixture(t *testing.T, endpoints ...string) *fixture {
	if len(endpoints) == 0 {
		endpoints = []string{"a", "b"}
	}
	fx := &fixture{t: t, dir: t.TempDir(), eps: newEndpoints(endpoints...), clock: newClock()}
	fx.open()
	t.Cleanup(func() {
		if fx.c != nil {
			fx.c.Close()
		}
	})
	return fx
}

func (fx *fixture) open() {
	fx.t.Helper()
	c, err := open(context.Background(), Options{Dir: fx.dir, TTL: time.Minute, Now: fx.clock.Now}, fx.eps, time.Hour, fx.tune)
	if err != nil {
		fx.t.Fatal(err)
	}
	// Predictable attempt ids, so that journals compare byte for byte.
	c.newAttempt = func() string { return fmt.Sprintf("attempt-%d", fx.attempts.Add(1)) }
	fx.c = c
}

// restart closes the coordinator and opens a new one on the same journal.
func (fx *fixture) restart() {
	fx.t.Helper()
	if err := fx.c.Close(); err != nil {
		fx.t.Fatal(err)
	}
	fx.c = nil
	fx.open()
}

// fillUntilCompacted begins transactions of a filler writer until the
// journal (opened with a small segmentBytes) has been compacted into one
// new segment, which restates every live transaction.
func (fx *fixture) fillUntilCompacted() {
	fx.t.Helper()
	before, _ := filepath.Glob(filepath.Join(fx.dir, "*.journal"))
	fx.fillers++ // epochs above the last call's: each begin a new record
	for e := range int64(40) {
		if _, err := fx.c.Begin(context.Background(), "filler", fx.fillers*40+e, 0); err != nil {
			fx.t.Fatal(err)
		}
	}
	segs, _ := filepath.Glob(filepath.Join(fx.dir, "*.journal"))
	if len(segs) != 1 || slices.Contains(before, segs[0]) {
		fx.t.Fatalf("segments %v (before: %v): want one new compacted segment", segs, before)
	}
}

// write joins a stream for (writer, epoch) on endpoint and ends it.
func (fx *fixture) write(writer string, epoch int64, endpoint string, rows int64) *Stream {
	fx.t.Helper()
	s, err := fx.c.Join(context.Background(), writer, epoch, endpoint)
	if err != nil {
		fx.t.Fatal(err)
	}
	s.Done(rows, nil)
	return s
}

func (fx *fixture) status(writer string, epoch int64) Status {
	fx.t.Helper()
	st, err := fx.c.Status(context.Background(), writer, epoch)
	if err != nil {
		fx.t.Fatal(err)
	}
	return st
}

func (fx *fixture) mustState(writer string, epoch int64, want State) Status {
	fx.t.Helper()
	st := fx.status(writer, epoch)
	if st.State != want {
		fx.t.Fatalf("%s@%d is %s, want %s", writer, epoch, st.State, want)
	}
	return st
}

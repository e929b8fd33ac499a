package txn

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quiver-ingest/quiver/internal/testpoll"
	"github.com/quiver-ingest/quiver/writers"
)

var bg = context.Background()

func TestStateMachineErrors(t *testing.T) {
	cases := []struct {
		name string
		run  func(fx *fixture) error
		want error
		msg  string
	}{
		{"empty writer", func(fx *fixture) error { _, err := fx.c.Begin(bg, "", 1, 0); return err }, writers.ErrInvalid, "writer is empty"},
		{"negative epoch", func(fx *fixture) error { _, err := fx.c.Join(bg, "w", -1, "a"); return err }, writers.ErrInvalid, "negative"},
		{"unknown endpoint", func(fx *fixture) error { _, err := fx.c.Join(bg, "w", 1, "nope"); return err }, writers.ErrNotFound, `"nope"`},
		{"unknown endpoint in handed descriptors", func(fx *fixture) error {
			_, err := fx.c.Commit(bg, "w", 1, map[string][]writers.Descriptor{"nope": {[]byte("d")}})
			return err
		}, writers.ErrNotFound, `"nope"`},
		{"status of unknown", func(fx *fixture) error { _, err := fx.c.Status(bg, "w", 1); return err }, writers.ErrNotFound, "no transaction w@1"},
		{"precommit of unknown", func(fx *fixture) error { _, err := fx.c.Precommit(bg, "w", 1); return err }, writers.ErrNotFound, "begin it"},
		{"commit of unknown", func(fx *fixture) error { _, err := fx.c.Commit(bg, "w", 1, nil); return err }, writers.ErrNotFound, "precommit it first"},
		{"commit before precommit", func(fx *fixture) error {
			fx.write("w", 1, "a", 10)
			_, err := fx.c.Commit(bg, "w", 1, nil)
			return err
		}, writers.ErrWrongState, "precommit it first"},
		{"precommit while a stream writes", func(fx *fixture) error {
			fx.c.Join(bg, "w", 1, "a")
			fx.c.Join(bg, "w", 1, "b")
			_, err := fx.c.Precommit(bg, "w", 1)
			return err
		}, writers.ErrWrongState, "2 stream(s) still writing"},
		{"precommit after a stream failed", func(fx *fixture) error {
			s, _ := fx.c.Join(bg, "w", 1, "a")
			s.Done(3, errors.New("client went away"))
			_, err := fx.c.Precommit(bg, "w", 1)
			return err
		}, writers.ErrWrongState, "a stream of this transaction failed (endpoint \"a\": client went away): roll back and replay the epoch"},
		{"join after precommit", func(fx *fixture) error {
			fx.write("w", 1, "a", 1)
			fx.c.Precommit(bg, "w", 1)
			_, err := fx.c.Join(bg, "w", 1, "a")
			return err
		}, writers.ErrWrongState, "precommitted"},
		{"join of a rolled-back attempt", func(fx *fixture) error {
			st, _ := fx.c.Begin(bg, "w", 1, 0)
			fx.c.Rollback(bg, "w", 1)
			_, err := fx.c.Join(WithAttempt(bg, st.Attempt), "w", 1, "a")
			return err
		}, writers.ErrWrongState, "begin it again"},
		{"commit after rollback", func(fx *fixture) error {
			fx.write("w", 1, "a", 1)
			fx.c.Precommit(bg, "w", 1)
			fx.c.Rollback(bg, "w", 1)
			_, err := fx.c.Commit(bg, "w", 1, nil)
			return err
		}, writers.ErrWrongState, "aborted"},
		{"rollback after commit", func(fx *fixture) error {
			fx.write("w", 1, "a", 1)
			fx.c.Precommit(bg, "w", 1)
			fx.c.Commit(bg, "w", 1, nil)
			_, err := fx.c.Rollback(bg, "w", 1)
			return err
		}, writers.ErrWrongState, "committed"},
		{"sink precommit failure keeps the transaction open", func(fx *fixture) error {
			fx.write("w", 1, "a", 1)
			fx.eps["a"].set(func(f *fakeWriter) { f.failPrecommit = writers.Errorf(writers.ErrUnavailable, "storage down") })
			_, err := fx.c.Precommit(bg, "w", 1)
			if fx.status("w", 1).State != StateOpen {
				return errors.New("not open after a failed precommit")
			}
			return err
		}, writers.ErrUnavailable, "storage down"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			err := tc.run(fx)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want class %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
}

func TestCommitTwoEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	fx := newFixture(t)
	fx.c.Close()
	fx.c = nil
	fx.tune = nil
	c, err := open(bg, Options{Dir: fx.dir, TTL: time.Minute, Now: fx.clock.Now, Registerer: reg}, fx.eps, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	fx.c = c

	st, err := c.Begin(bg, "job", 7, 0)
	if err != nil || st.State != StateOpen || !st.Deadline.Equal(fx.clock.Now().Add(time.Minute)) {
		t.Fatalf("begin: %+v %v", st, err)
	}
	fx.write("job", 7, "a", 10)
	fx.write("job", 7, "a", 5)
	fx.write("job", 7, "b", 2)
	if n := c.OpenTransactions(); n != 1 {
		t.Fatalf("open transactions = %d", n)
	}
	st, err = c.Precommit(bg, "job", 7)
	if err != nil || st.State != StatePrecommitted || len(st.Participants) != 2 {
		t.Fatalf("precommit: %+v %v", st, err)
	}
	if p := st.Participants[0]; p.Endpoint != "a" || p.Rows != 15 || string(p.Descriptor) != "a/job@7" || p.Version != writers.NoVersion {
		t.Fatalf("participant a: %+v", p)
	}
	again, err := c.Precommit(bg, "job", 7)
	if err != nil || again.State != StatePrecommitted || len(again.Participants) != 2 {
		t.Fatalf("second precommit: %+v %v", again, err)
	}
	if n, _, _, _ := fx.eps["a"].counts(); n != 1 {
		t.Fatalf("sink precommits = %d, want 1", n)
	}
	st, err = c.Commit(bg, "job", 7, nil)
	if err != nil || st.State != StateCommitted || st.Replayed {
		t.Fatalf("commit: %+v %v", st, err)
	}
	if st.Participants[0].Version != 1 || st.Participants[1].Version != 1 {
		t.Fatalf("versions: %+v", st.Participants)
	}
	for _, ep := range []string{"a", "b"} {
		f := fx.eps[ep]
		if len(f.commits) != 1 || len(f.commits[0].descs) != 1 || string(f.commits[0].descs[0]) != ep+"/job@7" {
			t.Fatalf("%s commits: %+v", ep, f.commits)
		}
	}
	st, err = c.Commit(bg, "job", 7, nil)
	if err != nil || st.State != StateCommitted || !st.Replayed || st.Participants[0].Version != 1 {
		t.Fatalf("second commit: %+v %v", st, err)
	}
	if _, n, _, _ := fx.eps["a"].counts(); n != 1 {
		t.Fatalf("sink commits = %d after a double commit, want 1", n)
	}
	if n := c.OpenTransactions(); n != 0 {
		t.Fatalf("open transactions = %d", n)
	}
	got := gatherCounters(t, reg)
	if got["quiver_transactions_total/committed"] != 1 || got["quiver_transactions_total/replayed"] != 1 || got["quiver_transactions_open"] != 0 {
		t.Fatalf("metrics %v", got)
	}
}

func gatherCounters(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			switch {
			case m.Counter != nil:
				out[name] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[name] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[name] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// Two endpoints may write one table, and Delta and Lance record a
// transaction's epoch in the table under its writer: a transaction that
// wrote the table through both had its second endpoint's commit find the
// epoch recorded by the first and publish nothing. The second endpoint's
// join is refused instead, naming both; other endpoints still join.
func TestJoinRefusesASecondEndpointOfOneTable(t *testing.T) {
	fx := newFixture(t, "a", "b", "c")
	fx.eps["b"].target, fx.eps["c"].target = "delta file:///t", "delta file:///t"
	fx.write("job", 1, "b", 3)
	fx.write("job", 1, "a", 2)
	fx.write("job", 1, "b", 1) // the same endpoint again
	_, err := fx.c.Join(bg, "job", 1, "c")
	if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), `endpoints "b" and "c" write the same table (delta file:///t)`) {
		t.Fatalf("join of a second endpoint of the table: %v, want ErrInvalid naming both", err)
	}
	fx.write("job", 2, "c", 4) // another epoch may use it
}

func TestRollbackIsIdempotent(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 3)
	for i := range 2 {
		st, err := fx.c.Rollback(bg, "w", 1)
		if err != nil || st.State != StateAborted {
			t.Fatalf("rollback %d: %+v %v", i, st, err)
		}
	}
	if _, _, n, _ := fx.eps["a"].counts(); n != 1 {
		t.Fatalf("sink rollbacks = %d, want 1", n)
	}
	if st, err := fx.c.Rollback(bg, "never", 4); err != nil || st.State != StateAborted {
		t.Fatalf("rollback of unknown: %+v %v", st, err)
	}
}

func TestRollbackRetriesFailedSinkRollback(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 3)
	fx.eps["a"].set(func(f *fakeWriter) { f.failRollback = writers.Errorf(writers.ErrUnavailable, "down") })
	st, err := fx.c.Rollback(bg, "w", 1)
	if !errors.Is(err, writers.ErrUnavailable) || st.State != StateAborted {
		t.Fatalf("rollback: %+v %v", st, err)
	}
	fx.eps["a"].set(func(f *fakeWriter) { f.failRollback = nil })
	if _, err := fx.c.Rollback(bg, "w", 1); err != nil {
		t.Fatal(err)
	}
	if _, _, n, _ := fx.eps["a"].counts(); n != 1 {
		t.Fatalf("sink rollbacks = %d, want 1", n)
	}
}

func TestBeginAfterRollbackReplaysTheEpoch(t *testing.T) {
	fx := newFixture(t)
	s, _ := fx.c.Join(bg, "w", 1, "a")
	s.Done(1, errors.New("broken pipe"))
	fx.c.Rollback(bg, "w", 1)
	if st, err := fx.c.Begin(bg, "w", 1, 0); err != nil || st.State != StateOpen || len(st.Participants) != 0 {
		t.Fatalf("begin again: %+v %v", st, err)
	}
	fx.write("w", 1, "a", 4)
	if _, err := fx.c.Precommit(bg, "w", 1); err != nil {
		t.Fatal(err)
	}
	if st, err := fx.c.Commit(bg, "w", 1, nil); err != nil || st.Participants[0].Rows != 4 {
		t.Fatalf("commit: %+v %v", st, err)
	}
}

func TestReplayBelowLastCommitted(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 5, "a", 1)
	fx.c.Precommit(bg, "w", 5)
	if _, err := fx.c.Commit(bg, "w", 5, nil); err != nil {
		t.Fatal(err)
	}
	for _, epoch := range []int64{5, 3} {
		s, err := fx.c.Join(bg, "w", epoch, "a")
		if err != nil || !s.Replayed() || s.Key() != (writers.TxnKey{Writer: "w", Epoch: epoch}) {
			t.Fatalf("join %d: replayed=%v %v", epoch, s != nil && s.Replayed(), err)
		}
		s.Done(100, nil)
	}
	st, err := fx.c.Precommit(bg, "w", 3)
	if err != nil || st.State != StatePrecommitted || !st.Replayed || len(st.Participants) != 0 {
		t.Fatalf("precommit replay: %+v %v", st, err)
	}
	st, err = fx.c.Commit(bg, "w", 3, nil)
	if err != nil || st.State != StateCommitted || !st.Replayed {
		t.Fatalf("commit replay: %+v %v", st, err)
	}
	if _, n, _, calls := fx.eps["a"].counts(); n != 1 || calls != 1 {
		t.Fatalf("sink commits %d, committed-epoch calls %d; want 1 and 1", n, calls)
	}
	// A newer epoch is not a replay.
	if s, err := fx.c.Join(bg, "w", 6, "a"); err != nil || s.Replayed() {
		t.Fatalf("join 6: %v", err)
	}
}

func TestReplayKnownFromTheSink(t *testing.T) {
	fx := newFixture(t)
	fx.eps["a"].set(func(f *fakeWriter) { f.committed["w"] = 9 })
	for range 3 {
		s, err := fx.c.Join(bg, "w", 8, "a")
		if err != nil || !s.Replayed() {
			t.Fatalf("join: %v", err)
		}
		s.Done(0, nil)
	}
	if _, _, _, calls := fx.eps["a"].counts(); calls != 1 {
		t.Fatalf("CommittedEpoch called %d times, want 1 (cached)", calls)
	}
	// Begin of a replayed epoch, then precommit and commit: all transparent.
	if _, err := fx.c.Begin(bg, "w", 8, 0); err != nil {
		t.Fatal(err)
	}
	fx.write("w", 8, "a", 10)
	if st, err := fx.c.Precommit(bg, "w", 8); err != nil || !st.Replayed {
		t.Fatalf("precommit: %+v %v", st, err)
	}
	if st, err := fx.c.Commit(bg, "w", 8, nil); err != nil || !st.Replayed || st.State != StateCommitted {
		t.Fatalf("commit: %+v %v", st, err)
	}
	if p, n, _, _ := fx.eps["a"].counts(); p != 0 || n != 0 {
		t.Fatalf("sink precommits %d commits %d, want none", p, n)
	}
	if v, ok, err := fx.c.CommittedEpoch(bg, "a", "w"); v != 9 || !ok || err != nil {
		t.Fatalf("CommittedEpoch = %d %v %v", v, ok, err)
	}
	if _, ok, err := fx.c.CommittedEpoch(bg, "a", "other"); ok || err != nil {
		t.Fatalf("CommittedEpoch of a new writer: ok=%v %v", ok, err)
	}
}

func TestFencing(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 5, "a", 1)
	if _, err := fx.c.Begin(bg, "w", 6, 0); err != nil {
		t.Fatal(err)
	}
	fx.mustState("w", 5, StateAborted)
	if _, _, n, _ := fx.eps["a"].counts(); n != 1 {
		t.Fatalf("sink rollbacks = %d, want 1", n)
	}
	if _, err := fx.c.Begin(bg, "w", 4, 0); !errors.Is(err, writers.ErrWrongState) || !strings.Contains(err.Error(), "fenced by epoch 6") {
		t.Fatalf("begin 4: %v", err)
	}
	if _, err := fx.c.Join(bg, "w", 5, "a"); !errors.Is(err, writers.ErrWrongState) {
		t.Fatalf("join fenced 5: %v", err)
	}
	// Other writers are not affected.
	fx.write("x", 1, "a", 1)

	// A precommitted epoch is not fenced, and fences older begins.
	fx.write("w", 6, "b", 1)
	fx.c.Precommit(bg, "w", 6)
	fx.write("w", 7, "b", 1)
	fx.mustState("w", 6, StatePrecommitted)
	fx.mustState("x", 1, StateOpen)

	// Fencing an epoch whose stream still writes rolls it back at Done.
	s, err := fx.c.Join(bg, "w", 8, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fx.c.Begin(bg, "w", 9, 0); err != nil {
		t.Fatal(err)
	}
	fx.mustState("w", 8, StateAborted)
	before := len(fx.eps["a"].rollbacks)
	s.Done(1, nil)
	if after := len(fx.eps["a"].rollbacks); after != before+1 || fx.eps["a"].rollbacks[after-1].Epoch != 8 {
		t.Fatalf("rollbacks %v", fx.eps["a"].rollbacks)
	}
}

func TestExpiry(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 1)
	fx.write("v", 1, "b", 1)
	fx.c.Precommit(bg, "v", 1)
	idle, _ := fx.c.Join(bg, "u", 1, "a")
	idleCtx := idle.Context(bg)
	busy, _ := fx.c.Join(bg, "y", 1, "a")
	busyCtx := busy.Context(bg)
	fx.clock.Advance(30 * time.Second)
	fx.write("z", 1, "a", 1) // refreshed later: lives longer
	busy.Busy()()            // a message keeps it alive
	fx.clock.Advance(45 * time.Second)
	fx.c.expireNow(fx.clock.Now())
	st := fx.mustState("w", 1, StateAborted)
	if !st.Deadline.IsZero() {
		t.Fatalf("aborted transaction has a deadline")
	}
	fx.mustState("v", 1, StateAborted)
	fx.mustState("z", 1, StateOpen)
	fx.mustState("y", 1, StateOpen)
	if busyCtx.Err() != nil {
		t.Fatalf("the busy stream was cut off: %v", context.Cause(busyCtx))
	}
	if _, _, n, _ := fx.eps["b"].counts(); n != 1 {
		t.Fatalf("b rollbacks %d", n)
	}
	// A stream without a batch for the ttl expires with its transaction:
	// cut off, and never acknowledged as staged.
	fx.mustState("u", 1, StateAborted)
	if cause := context.Cause(idleCtx); !errors.Is(cause, writers.ErrWrongState) || !strings.Contains(cause.Error(), "expired") {
		t.Fatalf("idle stream's context: %v, want the expiry", cause)
	}
	if err := idle.Done(1, nil); !errors.Is(err, writers.ErrWrongState) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("Done of the expired stream = %v", err)
	}
	if err := busy.Done(1, nil); err != nil {
		t.Fatal(err)
	}
	fx.clock.Advance(time.Hour)
	fx.c.expireNow(fx.clock.Now())
	fx.mustState("y", 1, StateAborted)
	// Terminal transactions are forgotten after the retention.
	fx.clock.Advance(2 * time.Hour)
	fx.c.expireNow(fx.clock.Now())
	if _, err := fx.c.Status(bg, "w", 1); !errors.Is(err, writers.ErrNotFound) {
		t.Fatalf("status after retention: %v", err)
	}
}

// TestNotForgottenWhileHeld: a terminal transaction past its retention is
// not forgotten while a call holds it (a begin starting the epoch afresh
// would journal into a transaction no longer known, and answer from it).
func TestNotForgottenWhileHeld(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 1)
	if _, err := fx.c.Rollback(bg, "w", 1); err != nil {
		t.Fatal(err)
	}
	held := fx.c.lockTxn(txnID{"w", 1})
	fx.clock.Advance(2 * fx.c.retention)
	fx.c.expireNow(fx.clock.Now())
	fx.mustState("w", 1, StateAborted)
	held.op.Unlock()
	fx.c.expireNow(fx.clock.Now())
	if _, err := fx.c.Status(bg, "w", 1); !errors.Is(err, writers.ErrNotFound) {
		t.Fatalf("status past the retention, no call holding it: %v, want NotFound", err)
	}
}

// The ttl measures how long the client leaves a transaction idle: while
// the server works for one of its streams (waits for memory, writes a
// batch), it does not run, however long that takes.
func TestServerSideWorkDoesNotExpire(t *testing.T) {
	fx := newFixture(t)
	st, _ := fx.c.Join(bg, "w", 1, "a")
	ctx := st.Context(bg)
	done := st.Busy()
	fx.clock.Advance(time.Hour)
	fx.c.expireNow(fx.clock.Now())
	fx.mustState("w", 1, StateOpen)
	done()
	fx.clock.Advance(59 * time.Second)
	fx.c.expireNow(fx.clock.Now())
	fx.mustState("w", 1, StateOpen) // the ttl restarted when the work ended
	fx.clock.Advance(2 * time.Minute)
	fx.c.expireNow(fx.clock.Now())
	fx.mustState("w", 1, StateAborted)
	if ctx.Err() == nil {
		t.Fatal("the idle stream was not cut off")
	}
	st.Done(0, nil)
}

func TestExpiryGoroutine(t *testing.T) {
	fx := newFixture(t)
	fx.c.Close()
	c, err := open(bg, Options{Dir: fx.dir, TTL: time.Minute, Now: fx.clock.Now}, fx.eps, time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	fx.c = c
	fx.write("w", 1, "a", 1)
	fx.clock.Advance(2 * time.Minute)
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for fx.status("w", 1).State != StateAborted {
		select {
		case <-deadline:
			t.Fatal("the expiry goroutine did not roll back the expired transaction")
		case <-tick.C:
		}
	}
}

func TestHandedDescriptorsOfUnknownTransaction(t *testing.T) {
	fx := newFixture(t)
	handed := map[string][]writers.Descriptor{"a": {[]byte("other-server-1"), []byte("other-server-2")}}
	st, err := fx.c.Commit(bg, "w", 3, handed)
	if err != nil || st.State != StateCommitted || st.Replayed || len(st.Participants) != 1 || st.Participants[0].Version != 1 {
		t.Fatalf("commit: %+v %v", st, err)
	}
	f := fx.eps["a"]
	if len(f.commits) != 1 || len(f.commits[0].descs) != 2 || string(f.commits[0].descs[1]) != "other-server-2" {
		t.Fatalf("sink commits %+v", f.commits)
	}
	if st, err := fx.c.Commit(bg, "w", 3, handed); err != nil || !st.Replayed {
		t.Fatalf("second commit: %+v %v", st, err)
	}
	// A fresh server whose sink already has the epoch answers replayed
	// without committing.
	fx2 := newFixture(t)
	fx2.eps["a"].set(func(f *fakeWriter) { f.committed["w"] = 3 })
	if st, err := fx2.c.Commit(bg, "w", 3, handed); err != nil || !st.Replayed || st.State != StateCommitted {
		t.Fatalf("commit on a sink that has it: %+v %v", st, err)
	}
	if _, n, _, _ := fx2.eps["a"].counts(); n != 0 {
		t.Fatalf("sink commits %d, want 0", n)
	}
}

func TestHandedDescriptorsJoinOwn(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 1)
	fx.c.Precommit(bg, "w", 1)
	// The orchestrator hands every server's descriptors, ours included.
	handed := map[string][]writers.Descriptor{"a": {[]byte("a/w@1"), []byte("peer")}, "b": {[]byte("peer-b")}}
	st, err := fx.c.Commit(bg, "w", 1, handed)
	if err != nil || len(st.Participants) != 2 {
		t.Fatalf("commit: %+v %v", st, err)
	}
	a := fx.eps["a"].commits[0].descs
	if len(a) != 2 || string(a[0]) != "a/w@1" || string(a[1]) != "peer" {
		t.Fatalf("a committed %q", a)
	}
	if b := fx.eps["b"].commits[0].descs; len(b) != 1 || string(b[0]) != "peer-b" {
		t.Fatalf("b committed %q", b)
	}
}

func TestCommitRetryAfterSinkFailure(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 1)
	fx.write("w", 1, "b", 1)
	fx.c.Precommit(bg, "w", 1)
	fx.eps["b"].set(func(f *fakeWriter) {
		f.failCommit = &writers.OutcomeUnknownError{Endpoint: "b", Err: errors.New("timeout")}
	})
	if _, err := fx.c.Commit(bg, "w", 1, nil); !errors.Is(err, writers.ErrOutcomeUnknown) {
		t.Fatalf("commit: %v, want outcome unknown", err)
	}
	fx.mustState("w", 1, StatePrecommitted)
	if _, err := fx.c.Rollback(bg, "w", 1); !errors.Is(err, writers.ErrWrongState) {
		t.Fatalf("rollback of a decided commit: %v", err)
	}
	fx.clock.Advance(time.Hour)
	fx.c.expireNow(fx.clock.Now())
	fx.mustState("w", 1, StatePrecommitted) // decided commits never expire
	fx.eps["b"].set(func(f *fakeWriter) { f.failCommit = nil })
	if st, err := fx.c.Commit(bg, "w", 1, nil); err != nil || st.State != StateCommitted {
		t.Fatalf("retry: %+v %v", st, err)
	}
	if _, n, _, _ := fx.eps["a"].counts(); n != 1 {
		t.Fatalf("a commits %d, want 1", n)
	}
}

func TestConcurrentTransactions(t *testing.T) {
	fx := newFixture(t)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			writer := string(rune('a'+w)) + "-job"
			for e := range int64(5) {
				var streams sync.WaitGroup
				for _, ep := range []string{"a", "b"} {
					streams.Go(func() {
						s, err := fx.c.Join(bg, writer, e, ep)
						if err != nil {
							t.Error(err)
							return
						}
						s.Done(1, nil)
					})
				}
				streams.Wait()
				if _, err := fx.c.Precommit(bg, writer, e); err != nil {
					t.Error(err)
					return
				}
				if _, err := fx.c.Commit(bg, writer, e, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if _, n, _, _ := fx.eps["a"].counts(); n != 40 {
		t.Fatalf("a commits %d, want 40", n)
	}
}

func TestCrashPoints(t *testing.T) {
	fx := newFixture(t)
	var points []string
	var mu sync.Mutex
	fx.c.crash = func(p string) {
		mu.Lock()
		defer mu.Unlock()
		points = append(points, p)
	}
	fx.write("w", 1, "a", 1)
	fx.c.Precommit(bg, "w", 1)
	fx.c.Commit(bg, "w", 1, nil)
	if strings.Join(points, ",") != "after-precommit,after-commit-decision" {
		t.Fatalf("crash points %v", points)
	}
	t.Setenv(crashEnv, "sometime")
	if _, err := Open(bg, Options{Dir: t.TempDir()}, fx.eps); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("Open with a bad %s: %v", crashEnv, err)
	}
}

// TestCommitConflictEverywhereAborts: a decided commit that every sink
// refuses with a conflict published nothing and can never succeed, so it is
// undone: the transaction is aborted, its parts rolled back, and the epoch
// can be begun again and replayed. A conflict after another endpoint
// committed keeps the decision (half of it is published).
func TestCommitConflictEverywhereAborts(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 1)
	fx.c.Precommit(bg, "w", 1)
	conflict := writers.Errorf(writers.ErrConflict, "delta: a concurrent commit removed a file this upsert rewrites")
	fx.eps["a"].set(func(f *fakeWriter) { f.failCommit = conflict })
	_, err := fx.c.Commit(bg, "w", 1, nil)
	if !errors.Is(err, writers.ErrConflict) || !strings.Contains(err.Error(), "begin the epoch again and replay it") {
		t.Fatalf("commit: %v, want a conflict telling to replay", err)
	}
	fx.mustState("w", 1, StateAborted)
	if _, _, rollbacks, _ := fx.eps["a"].counts(); rollbacks != 1 {
		t.Fatalf("rollbacks = %d, want 1", rollbacks)
	}
	fx.eps["a"].set(func(f *fakeWriter) { f.failCommit = nil })
	if _, err := fx.c.Begin(bg, "w", 1, 0); err != nil {
		t.Fatalf("begin the aborted epoch again: %v", err)
	}
	fx.write("w", 1, "a", 1)
	fx.c.Precommit(bg, "w", 1)
	if st, err := fx.c.Commit(bg, "w", 1, nil); err != nil || st.State != StateCommitted {
		t.Fatalf("replayed epoch: %+v %v", st, err)
	}

	// Two endpoints: a commits, b conflicts → the decision stays.
	fx.write("w", 2, "a", 1)
	fx.write("w", 2, "b", 1)
	fx.c.Precommit(bg, "w", 2)
	fx.eps["b"].set(func(f *fakeWriter) { f.failCommit = conflict })
	if _, err := fx.c.Commit(bg, "w", 2, nil); !errors.Is(err, writers.ErrConflict) || !strings.Contains(err.Error(), "decided and kept") {
		t.Fatalf("half-committed: %v, want the decision kept", err)
	}
	fx.mustState("w", 2, StatePrecommitted)
}

// TestCommitRefusedEverywhereAborts: a decided commit that every sink
// refuses as invalid (the table created meanwhile with other columns, the
// staged files gone) published nothing and would be refused forever, while
// rollback refuses a decided commit: it is undone like a conflict, and the
// epoch can be begun again. An unknown outcome beside a refusal keeps it.
func TestCommitRefusedEverywhereAborts(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 1)
	fx.write("w", 1, "b", 1)
	fx.c.Precommit(bg, "w", 1)
	invalid := writers.Errorf(writers.ErrInvalid, "delta: the table was created meanwhile with other columns")
	fx.eps["a"].set(func(f *fakeWriter) { f.failCommit = invalid })
	fx.eps["b"].set(func(f *fakeWriter) {
		f.failCommit = writers.Errorf(writers.ErrConflict, "delta: a concurrent commit removed a file")
	})
	_, err := fx.c.Commit(bg, "w", 1, nil)
	if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "begin the epoch again and replay it") {
		t.Fatalf("commit: %v, want the refusal telling to replay", err)
	}
	fx.mustState("w", 1, StateAborted)
	if _, err := fx.c.Begin(bg, "w", 1, 0); err != nil {
		t.Fatalf("begin the aborted epoch again: %v", err)
	}
	// The replay, once the tables take it.
	fx.eps["a"].set(func(f *fakeWriter) { f.failCommit = nil })
	fx.eps["b"].set(func(f *fakeWriter) { f.failCommit = nil })
	fx.write("w", 1, "a", 1)
	fx.write("w", 1, "b", 1)
	if _, err := fx.c.Precommit(bg, "w", 1); err != nil {
		t.Fatal(err)
	}
	if st, err := fx.c.Commit(bg, "w", 1, nil); err != nil || st.State != StateCommitted {
		t.Fatalf("commit of the replay: %+v %v", st, err)
	}

	// A refusal beside an unknown outcome: the decision stays.
	fx.write("w", 2, "a", 1)
	fx.write("w", 2, "b", 1)
	fx.c.Precommit(bg, "w", 2)
	fx.eps["a"].set(func(f *fakeWriter) { f.failCommit = invalid })
	fx.eps["b"].set(func(f *fakeWriter) {
		f.failCommit = writers.Errorf(writers.ErrInvalid, "lost answer: %w", writers.ErrOutcomeUnknown)
	})
	if _, err := fx.c.Commit(bg, "w", 2, nil); !strings.Contains(fmt.Sprint(err), "decided and kept") {
		t.Fatalf("refusal beside an unknown outcome: %v, want the decision kept", err)
	}
	fx.mustState("w", 2, StatePrecommitted)

	// A refusal of an epoch a crashed process already published on a
	// sink (the journal never said so): the sink is asked and, holding the
	// epoch, the refusal is taken for a replay: committed, not undone and
	// not kept for ever.
	fx.eps["a"].set(func(f *fakeWriter) { f.failCommit = nil })
	fx.eps["b"].set(func(f *fakeWriter) { f.failCommit = nil })
	fx.write("x", 1, "a", 1)
	fx.c.Precommit(bg, "x", 1)
	fx.eps["a"].set(func(f *fakeWriter) {
		f.committed["x"] = 1 // published by a process that crashed
		f.failCommit = invalid
	})
	if st, err := fx.c.Commit(bg, "x", 1, nil); err != nil || st.State != StateCommitted || !st.Replayed {
		t.Fatalf("refusal of an epoch the sink holds: %+v %v, want it committed as a replay", st, err)
	}

	// A refusal while a later epoch of the writer is precommitted: undoing
	// this one would let the later commit first and this replay be
	// dropped; the decision stays.
	fx.eps["a"].set(func(f *fakeWriter) { f.failCommit = nil })
	fx.write("y", 1, "a", 1)
	fx.c.Precommit(bg, "y", 1)
	fx.write("y", 2, "a", 1)
	fx.c.Precommit(bg, "y", 2)
	fx.eps["a"].set(func(f *fakeWriter) { f.failCommit = invalid })
	if _, err := fx.c.Commit(bg, "y", 1, nil); !strings.Contains(fmt.Sprint(err), "roll that one back and commit this one again") {
		t.Fatalf("refusal with a later epoch precommitted: %v, want the decision kept, saying how out", err)
	}
	fx.mustState("y", 1, StatePrecommitted)
	// The way out it names: roll the later epoch back, commit again.
	if _, err := fx.c.Rollback(bg, "y", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.c.Commit(bg, "y", 1, nil); !strings.Contains(fmt.Sprint(err), "begin the epoch again and replay it") {
		t.Fatalf("refusal once the later epoch is rolled back: %v, want it undone", err)
	}
	fx.mustState("y", 1, StateAborted)
}

// TestBeginWaitsForAnUndoneEpoch: once an epoch's refused commit is
// undone, later epochs of the writer neither begin nor commit until its
// replay is committed or the client gives it up (GiveUp):
// committing first, a later epoch would make the replay read as a replay
// and drop it. A replay attempt that ends otherwise (fenced by a new
// attempt, expired) leaves the debt; epochs owing at once wait in order.
func TestBeginWaitsForAnUndoneEpoch(t *testing.T) {
	fx := newFixture(t)
	undo := func(writer string, epoch int64) {
		t.Helper()
		undoEpoch(t, fx, writer, epoch)
	}
	refused := func(writer string, epoch int64, owed int64, when string) {
		t.Helper()
		_, err := fx.c.Begin(bg, writer, epoch, 0)
		if !errors.Is(err, writers.ErrWrongState) || !strings.Contains(err.Error(), fmt.Sprintf("epoch %d of writer %q was aborted", owed, writer)) {
			t.Fatalf("%s: begin %s@%d: %v, want it refused until epoch %d is replayed", when, writer, epoch, err, owed)
		}
	}
	undo("w", 1)
	refused("w", 2, 1, "before the replay")
	if n := fx.c.owingReplays(); n != 1 { // quiver_transactions_owing_replay
		t.Fatalf("%d epochs owing their replay, want 1", n)
	}
	// Replay attempts that end without a commit settle nothing.
	if _, err := fx.c.Begin(bg, "w", 1, 0); err != nil {
		t.Fatalf("begin of the undone epoch: %v", err)
	}
	refused("w", 2, 1, "while the replay is open")
	fx.write("w", 1, "a", 1)
	if _, err := fx.c.Begin(bg, "w", 1, 0); err != nil { // fences the open attempt
		t.Fatal(err)
	}
	fx.clock.Advance(2 * time.Minute)
	fx.c.expireNow(fx.clock.Now())
	fx.mustState("w", 1, StateAborted)
	refused("w", 2, 1, "after a fenced and an expired replay attempt")
	// The replay committed settles it.
	replayEpoch(t, fx, "w", 1)
	if _, err := fx.c.Begin(bg, "w", 2, 0); err != nil {
		t.Fatalf("begin of a later epoch once the replay is committed: %v", err)
	}
	if n := fx.c.owingReplays(); n != 0 {
		t.Fatalf("%d epochs owing their replay once it is committed, want 0", n)
	}

	// A rollback (a client's cleanup after an error) gives nothing up,
	// aborted or while its replay is open; GiveUp does, either way.
	undo("v", 1)
	if _, err := fx.c.Rollback(bg, "v", 1); err != nil {
		t.Fatal(err)
	}
	refused("v", 2, 1, "after a rollback of the undone epoch")
	ended := func() time.Time {
		fx.c.mu.Lock()
		defer fx.c.mu.Unlock()
		return fx.c.txns[txnID{"v", 1}].ended
	}
	before := ended()
	fx.clock.Advance(time.Second)
	if _, err := fx.c.GiveUp(bg, "v", 1); err != nil {
		t.Fatal(err)
	}
	if after := ended(); !after.Equal(before) { // its retention runs from its abort
		t.Fatalf("giving up an aborted epoch moved its end from %v to %v", before, after)
	}
	if _, err := fx.c.Begin(bg, "v", 2, 0); err != nil {
		t.Fatalf("begin of a later epoch once the undone one is given up: %v", err)
	}
	undo("u", 1)
	undone := WithAttempt(bg, fx.status("u", 1).Attempt) // the client's handle
	if _, err := fx.c.Begin(bg, "u", 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.c.Rollback(bg, "u", 1); err != nil {
		t.Fatal(err)
	}
	refused("u", 2, 1, "after a rollback of the replay attempt")
	// Giving up from the undone attempt's handle: refused while another
	// attempt is live (its rows are not the caller's), done once aborted.
	if _, err := fx.c.Begin(bg, "u", 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.c.GiveUp(undone, "u", 1); !errors.Is(err, writers.ErrWrongState) || !strings.Contains(err.Error(), "is current") {
		t.Fatalf("give up naming an old attempt while another is live: %v, want WrongState", err)
	}
	fx.mustState("u", 1, StateOpen)
	if _, err := fx.c.Rollback(bg, "u", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.c.GiveUp(undone, "u", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.c.Begin(bg, "u", 2, 0); err != nil {
		t.Fatalf("begin of a later epoch once the epoch is given up: %v", err)
	}
	undo("s", 1)
	if _, err := fx.c.Begin(bg, "s", 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.c.GiveUp(bg, "s", 1); err != nil { // its replay attempt, live
		t.Fatal(err)
	}
	if _, err := fx.c.Begin(bg, "s", 2, 0); err != nil {
		t.Fatalf("begin of a later epoch once the replay attempt is given up: %v", err)
	}

	// Two epochs owing: the earlier first; settling it leaves the later.
	undo("x", 5)
	undo("x", 3)
	refused("x", 5, 3, "two owed")
	replayEpoch(t, fx, "x", 3)
	refused("x", 6, 5, "one of two settled")
	replayEpoch(t, fx, "x", 5)
	if _, err := fx.c.Begin(bg, "x", 6, 0); err != nil {
		t.Fatalf("begin once both replays are committed: %v", err)
	}

	// A replay refused everywhere again, whose undo the journal refuses:
	// the decision stands, and the debt it was replaying too.
	undo("y", 1)
	if _, err := fx.c.Begin(bg, "y", 1, 0); err != nil {
		t.Fatal(err)
	}
	fx.write("y", 1, "a", 1)
	if _, err := fx.c.Precommit(bg, "y", 1); err != nil {
		t.Fatal(err)
	}
	fx.eps["a"].set(func(f *fakeWriter) {
		f.failCommit = writers.Errorf(writers.ErrInvalid, "delta: the table was created meanwhile with other columns")
		f.onCommit = func() { fx.c.j.Close() } // the decision is journaled, the undo will not be
	})
	if _, err := fx.c.Commit(bg, "y", 1, nil); !errors.Is(err, writers.ErrUnavailable) {
		t.Fatalf("commit whose undo cannot be journaled: %v, want Unavailable", err)
	}
	fx.mustState("y", 1, StatePrecommitted)
	refused("y", 2, 1, "a failed undo of the replay")
}

// TestUndoSeesAnEpochBeingBegunAgain: a later epoch that was aborted and
// is being begun again (its begin not yet journaled, so not yet live)
// counts as live for the undo of an earlier epoch's refused commit: undone,
// the earlier epoch would owe a replay that the later one, once begun,
// fences (and the later one could not commit either: the writer stuck).
func TestUndoSeesAnEpochBeingBegunAgain(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 1)
	if _, err := fx.c.Precommit(bg, "w", 1); err != nil {
		t.Fatal(err)
	}
	fx.write("w", 2, "a", 1)
	if _, err := fx.c.Rollback(bg, "w", 2); err != nil {
		t.Fatal(err)
	}
	begun := make(chan error, 1)
	hooked, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(proceed) }) }
	defer release() // a failed poll below must not leave the sink waiting
	fx.eps["a"].set(func(f *fakeWriter) {
		f.failCommit = writers.Errorf(writers.ErrInvalid, "delta: the table was created meanwhile with other columns")
		f.onCommit = func() {
			f.onCommit = nil
			fx.c.gate.Lock() // the begin's journal append waits here
			go func() { _, err := fx.c.Begin(bg, "w", 2, 0); begun <- err }()
			close(hooked)
			<-proceed // the test sees the begin starting
		}
	})
	committed := make(chan error, 1)
	go func() { _, err := fx.c.Commit(bg, "w", 1, nil); committed <- err }()
	<-hooked
	testpoll.Until(t, "epoch 2 being begun again", func() bool {
		fx.c.mu.Lock()
		defer fx.c.mu.Unlock()
		return fx.c.txns[txnID{"w", 2}].starting
	})
	release()
	// The commit answers, or is undoing epoch 1 (its abort waits for the gate).
	testpoll.Until(t, "the commit to answer or undo", func() bool {
		fx.c.mu.Lock()
		defer fx.c.mu.Unlock()
		return len(committed) > 0 || fx.c.txns[txnID{"w", 1}].undoing
	})
	fx.c.gate.Unlock()
	err := <-committed
	if !strings.Contains(fmt.Sprint(err), "a later epoch of writer") {
		t.Fatalf("commit refused everywhere while epoch 2 is being begun again: %v, want the decision kept", err)
	}
	if err := <-begun; err != nil {
		t.Fatalf("begin of epoch 2: %v", err)
	}
	fx.mustState("w", 1, StatePrecommitted)
}

// undoEpoch has every endpoint refuse (writer, epoch)'s decided commit, so
// that the coordinator undoes it.
func undoEpoch(t *testing.T, fx *fixture, writer string, epoch int64) {
	t.Helper()
	fx.write(writer, epoch, "a", 1)
	if _, err := fx.c.Precommit(bg, writer, epoch); err != nil {
		t.Fatal(err)
	}
	fx.eps["a"].set(func(f *fakeWriter) {
		f.failCommit = writers.Errorf(writers.ErrInvalid, "delta: the table was created meanwhile with other columns")
	})
	defer fx.eps["a"].set(func(f *fakeWriter) { f.failCommit = nil })
	if _, err := fx.c.Commit(bg, writer, epoch, nil); !strings.Contains(fmt.Sprint(err), "begin the epoch again and replay it") {
		t.Fatalf("commit %s@%d: %v, want it undone", writer, epoch, err)
	}
}

// replayEpoch begins, writes, precommits and commits (writer, epoch).
func replayEpoch(t *testing.T, fx *fixture, writer string, epoch int64) {
	t.Helper()
	if _, err := fx.c.Begin(bg, writer, epoch, 0); err != nil {
		t.Fatalf("begin %s@%d: %v", writer, epoch, err)
	}
	fx.write(writer, epoch, "a", 1)
	if _, err := fx.c.Precommit(bg, writer, epoch); err != nil {
		t.Fatal(err)
	}
	if st, err := fx.c.Commit(bg, writer, epoch, nil); err != nil || st.State != StateCommitted {
		t.Fatalf("commit %s@%d: %+v %v", writer, epoch, st, err)
	}
}

// TestUndoneEpochOwesItsReplayDurably: the replay an undone epoch owes
// is in the journal (its abort record, restated by compactions with the
// attempt, owner and endpoints a rollback is checked against), so a
// restart does not let a later epoch begin first, nor does the restart
// aborting a replay attempt, nor a plain rollback; the epoch is never
// forgotten while it owes, and committing its replay or giving it up
// settles the debt for good.
func TestUndoneEpochOwesItsReplayDurably(t *testing.T) {
	fx := newFixture(t)
	fx.tune = func(c *Coordinator) { c.segmentBytes = 4 << 10 }
	fx.restart()
	refused := func(writer, when string) {
		t.Helper()
		if _, err := fx.c.Begin(bg, writer, 2, 0); !errors.Is(err, writers.ErrWrongState) || !strings.Contains(err.Error(), "replay it first") {
			t.Fatalf("%s: begin of a later epoch of %q: %v, want it refused until epoch 1 is replayed", when, writer, err)
		}
	}
	begins := func(writer string, epoch int64, when string) {
		t.Helper()
		if _, err := fx.c.Begin(bg, writer, epoch, 0); err != nil {
			t.Fatalf("%s: begin %q %d: %v", when, writer, epoch, err)
		}
	}
	undoEpoch(t, fx, "w", 1)
	undoEpoch(t, fx, "v", 1)
	want := fx.status("v", 1) // before any compaction
	fx.restart()
	refused("w", "after a restart")
	refused("v", "after a restart")

	// A replay attempt the restart aborts (open), before and after a
	// compaction restating it live, settles nothing.
	begins("w", 1, "a replay attempt")
	fx.write("w", 1, "a", 1)
	fx.restart()
	refused("w", "after a restart aborted the replay attempt")
	begins("w", 1, "a second replay attempt")
	fx.fillUntilCompacted()
	fx.restart()
	refused("w", "after a compaction restated the replay attempt and a restart aborted it")

	// Far past the retention, the owing epochs are still known. The client
	// rolls back naming its attempt (as the clients do): a compaction keeps
	// the attempt, owner and endpoints the rollback is checked against.
	fx.clock.Advance(30 * 24 * time.Hour)
	fx.c.expireNow(fx.clock.Now())
	fx.fillUntilCompacted()
	fx.restart()
	if st := fx.status("v", 1); st.Attempt != want.Attempt || st.Owner != want.Owner || st.State != StateAborted || !reflect.DeepEqual(st.Participants, want.Participants) || len(want.Participants) != 1 {
		t.Fatalf("owing epoch after a compaction and a restart: %+v, want %+v", st, want)
	}
	fx.c.mu.Lock()
	endpoints := fx.c.txns[txnID{"v", 1}].endpointsLocked()
	fx.c.mu.Unlock()
	if !slices.Equal(endpoints, []string{"a"}) { // what its access is checked against
		t.Fatalf("owing epoch's endpoints after a compaction and a restart: %v, want [a]", endpoints)
	}
	refused("w", "after the retention, a compaction and a restart")
	refused("v", "after the retention, a compaction and a restart")
	if _, err := fx.c.Rollback(WithAttempt(bg, want.Attempt), "v", 1); err != nil {
		t.Fatal(err)
	}
	fx.restart()
	refused("v", "after a rollback (not a give-up) and a restart")
	if _, err := fx.c.GiveUp(WithAttempt(bg, want.Attempt), "v", 1); err != nil {
		t.Fatal(err)
	}
	fx.restart()
	begins("v", 2, "after the epoch was given up and a restart")

	replayEpoch(t, fx, "w", 1)
	fx.restart()
	begins("w", 2, "after the replay was committed and a restart")
}

// TestCommitRewritesFirst: an endpoint that rewrites what the transaction
// read (upsert) commits before the others; when a concurrent commit refuses
// it for good, nothing was published (the append endpoint was not asked),
// and the decision is undone instead of being left half published.
func TestCommitRewritesFirst(t *testing.T) {
	fx := newFixture(t)
	fx.eps["b"].set(func(f *fakeWriter) { f.single = true })
	fx.write("w", 1, "a", 1)
	fx.write("w", 1, "b", 1)
	fx.c.Precommit(bg, "w", 1)
	fx.eps["b"].set(func(f *fakeWriter) {
		f.failCommit = writers.Errorf(writers.ErrConflict, "delta: a concurrent append added rows this upsert did not read")
	})
	if _, err := fx.c.Commit(bg, "w", 1, nil); !errors.Is(err, writers.ErrConflict) || !strings.Contains(err.Error(), "begin the epoch again and replay it") {
		t.Fatalf("commit: %v, want the conflict telling to replay", err)
	}
	fx.mustState("w", 1, StateAborted)
	if _, commits, _, _ := fx.eps["a"].counts(); commits != 0 {
		t.Fatalf("the append endpoint committed %d times before the upsert, want 0", commits)
	}
}

// TestStreamTurns: two streams of one transaction on one endpoint take
// turns to write (a sink's Write of one key is never concurrent); one
// whose context ends while it waits gets the cause; a stream on another
// endpoint and a replayed one never wait.
func TestStreamTurns(t *testing.T) {
	fx := newFixture(t)
	first, err := fx.c.Join(bg, "w", 1, "a")
	if err != nil {
		t.Fatal(err)
	}
	second, _ := fx.c.Join(bg, "w", 1, "a")
	other, _ := fx.c.Join(bg, "w", 1, "b")
	done, err := first.Turn(bg)
	if err != nil {
		t.Fatal(err)
	}
	if end, err := other.Turn(bg); err != nil {
		t.Fatalf("a stream on another endpoint waited: %v", err)
	} else {
		end()
	}
	// The first holds the turn: the second can only see its context end.
	why := errors.New("client gone")
	ctx, cancel := context.WithCancelCause(bg)
	cancel(why)
	if _, err := second.Turn(ctx); !errors.Is(err, why) {
		t.Fatalf("turn with an ended context: %v, want %v", err, why)
	}
	done()
	end, err := second.Turn(bg)
	if err != nil {
		t.Fatalf("the second stream's turn after the first's: %v", err)
	}
	end()
	for _, s := range []*Stream{first, second, other} {
		s.Done(0, nil)
	}
}

// TestOneEpochWriter: a one-epoch writer's other epochs are refused where
// transactions are created (begin, join, a commit of handed
// descriptors), not where they are used: one an earlier version
// journaled is still seen, committed and rolled back.
func TestOneEpochWriter(t *testing.T) {
	fx := newFixture(t, "a")
	fx.write("one", 3, "a", 1) // journaled before the writer was one-epoch
	if _, err := fx.c.Precommit(bg, "one", 3); err != nil {
		t.Fatal(err)
	}
	fx.write("one", 4, "a", 1)
	fx.c.oneEpoch = func(w string) bool { return w == "one" }
	invalid := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "only epoch is 0") {
			t.Errorf("%s: %v, want ErrInvalid naming the one epoch", what, err)
		}
	}
	_, err := fx.c.Begin(bg, "one", 5, 0)
	invalid("begin of epoch 5", err)
	_, err = fx.c.Join(bg, "one", 6, "a")
	invalid("join of epoch 6", err)
	_, err = fx.c.Commit(bg, "one", 7, map[string][]writers.Descriptor{"a": {[]byte("peer")}})
	invalid("commit of handed descriptors of epoch 7", err)

	fx.mustState("one", 3, StatePrecommitted)
	if st, err := fx.c.Commit(bg, "one", 3, nil); err != nil || st.State != StateCommitted {
		t.Fatalf("commit of the journaled epoch 3: %+v %v", st, err)
	}
	if _, err := fx.c.Rollback(bg, "one", 4); err != nil {
		t.Fatalf("rollback of the journaled epoch 4: %v", err)
	}
	if _, err := fx.c.Begin(bg, "two", 5, 0); err != nil {
		t.Fatalf("begin of another writer's epoch 5: %v", err)
	}
}

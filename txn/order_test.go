package txn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
)

// TestCommitsInEpochOrder: with N and N+1 of one writer precommitted,
// committing N+1 first is refused naming N (publishing it would make N
// read as committed in every sink, and N's rows would never be published);
// N then N+1 both publish.
func TestCommitsInEpochOrder(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 10, "a", 1)
	if _, err := fx.c.Precommit(bg, "w", 10); err != nil {
		t.Fatal(err)
	}
	fx.write("w", 11, "a", 1)
	if _, err := fx.c.Precommit(bg, "w", 11); err != nil {
		t.Fatal(err)
	}
	_, err := fx.c.Commit(bg, "w", 11, nil)
	if !errors.Is(err, writers.ErrWrongState) || !strings.Contains(err.Error(), "epoch 10") {
		t.Fatalf("commit 11 before 10: %v, want ErrWrongState naming epoch 10", err)
	}
	fx.mustState("w", 11, StatePrecommitted)
	for _, epoch := range []int64{10, 11} {
		st, err := fx.c.Commit(bg, "w", epoch, nil)
		if err != nil || st.Replayed {
			t.Fatalf("commit %d: %+v %v", epoch, st, err)
		}
	}
	// Rolling an older epoch back unblocks a newer one too.
	fx.write("w", 12, "a", 1)
	fx.c.Precommit(bg, "w", 12)
	fx.write("w", 13, "a", 1)
	fx.c.Precommit(bg, "w", 13)
	if _, err := fx.c.Rollback(bg, "w", 12); err != nil {
		t.Fatal(err)
	}
	if st, err := fx.c.Commit(bg, "w", 13, nil); err != nil || st.Replayed {
		t.Fatalf("commit 13 after rolling 12 back: %+v %v", st, err)
	}
	var got []int64
	for _, c := range fx.eps["a"].commits {
		got = append(got, c.key.Epoch)
	}
	if !slices.Equal(got, []int64{10, 11, 13}) {
		t.Fatalf("sink commits %v, want [10 11 13]", got)
	}
}

// TestCoordinatorModel drives random interleavings of begin, put,
// precommit, commit, rollback, failing sinks and restarts over several
// writers, epochs and endpoints, as correct clients would (a writer's new
// epochs grow; an aborted epoch is replayed only while no later epoch
// committed), and checks against a model that every epoch answered
// committed is published exactly once on every endpoint it wrote to, and
// on no other. Clients also crash and replay an uncommitted epoch from a
// new connection, with a begin or with a first put: the replay's commit
// publishes the replay's endpoints only, never what the crashed attempt
// staged.
func TestCoordinatorModel(t *testing.T) {
	seeds := 150
	if testing.Short() {
		seeds = 40
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, uint64(seed)) })
	}
}

// modelTxn is what a client knows of one (writer, epoch).
type modelTxn struct {
	endpoints    map[string]bool // written to by successful, non-replayed streams
	precommitted bool            // answered precommitted
	decided      bool            // a commit failed after its decision: it may finish later
	committed    bool            // answered committed
	aborted      bool            // rolled back by the client, or open at a restart
}

func runModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	fx := newFixture(t, "a", "b")
	writerNames := []string{"w1", "w2"}
	endpoints := []string{"a", "b"}
	txns := map[txnID]*modelTxn{}
	next := map[string]int64{"w1": 1, "w2": 1}
	maxCommitted := map[string]int64{}
	var history []string

	pick := func(writer string) (txnID, *modelTxn, bool) {
		var ids []txnID
		for id := range txns {
			if id.writer == writer {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return txnID{}, nil, false
		}
		slices.SortFunc(ids, func(x, y txnID) int { return int(x.epoch - y.epoch) })
		id := ids[rng.IntN(len(ids))]
		return id, txns[id], true
	}
	check := func() {
		t.Helper()
		for id, m := range txns {
			if !m.committed {
				continue
			}
			for _, ep := range endpoints {
				n := 0
				for _, c := range fx.eps[ep].commits {
					if c.key == (writers.TxnKey{Writer: id.writer, Epoch: id.epoch}) {
						n++
					}
				}
				if want := map[bool]int{true: 1}[m.endpoints[ep]]; n != want {
					t.Fatalf("seed %d: %s answered committed and published %d times on %s, want %d\n%s", seed, id, n, ep, want, strings.Join(history, "\n"))
				}
			}
		}
	}
	conns := 0

	for range 40 {
		writer := writerNames[rng.IntN(len(writerNames))]
		switch op := rng.IntN(10); op {
		case 0: // a new epoch, with a stream
			id := txnID{writer, next[writer]}
			next[writer]++
			ep := endpoints[rng.IntN(2)]
			s, err := fx.c.Join(bg, id.writer, id.epoch, ep)
			history = append(history, fmt.Sprintf("put %s %s: %v", id, ep, err))
			if err == nil {
				s.Done(1, nil)
				txns[id] = &modelTxn{endpoints: map[string]bool{ep: true}}
			}
		case 1: // another stream into an existing epoch
			id, m, ok := pick(writer)
			if !ok || m.committed || m.precommitted || maxCommitted[writer] > id.epoch {
				// A later epoch committed: a correct client writes new
				// rows under a new epoch now.
				continue
			}
			if m.aborted {
				if _, err := fx.c.Begin(bg, id.writer, id.epoch, 0); err != nil {
					history = append(history, fmt.Sprintf("begin %s again: %v", id, err))
					continue
				}
				m.aborted, m.precommitted = false, false
				m.endpoints = map[string]bool{}
			}
			ep := endpoints[rng.IntN(2)]
			s, err := fx.c.Join(bg, id.writer, id.epoch, ep)
			history = append(history, fmt.Sprintf("put %s %s: %v", id, ep, err))
			if err == nil {
				if s.Replayed() {
					t.Fatalf("seed %d: stream into uncommitted %s answered replayed\n%s", seed, id, strings.Join(history, "\n"))
				}
				s.Done(1, nil)
				m.endpoints[ep] = true
			}
		case 2, 3:
			id, m, ok := pick(writer)
			if !ok || m.aborted {
				continue
			}
			st, err := fx.c.Precommit(bg, id.writer, id.epoch)
			history = append(history, fmt.Sprintf("precommit %s: replayed=%v %v", id, st.Replayed, err))
			if err == nil {
				if st.Replayed && !m.committed && !m.decided {
					t.Fatalf("seed %d: precommit of uncommitted %s answered replayed\n%s", seed, id, strings.Join(history, "\n"))
				}
				m.precommitted = true
				m.committed = m.committed || st.Replayed
			}
		case 4, 5:
			id, m, ok := pick(writer)
			if !ok || m.aborted {
				continue
			}
			st, err := fx.c.Commit(bg, id.writer, id.epoch, nil)
			history = append(history, fmt.Sprintf("commit %s: replayed=%v %v", id, st.Replayed, err))
			if err == nil {
				if st.Replayed && !m.committed && !m.decided {
					t.Fatalf("seed %d: first commit of %s answered replayed\n%s", seed, id, strings.Join(history, "\n"))
				}
				m.committed = true
				maxCommitted[writer] = max(maxCommitted[writer], id.epoch)
			} else if strings.Contains(err.Error(), "the commit is decided") {
				m.decided = true
			}
		case 6:
			id, m, ok := pick(writer)
			if !ok || m.committed {
				continue
			}
			_, err := fx.c.Rollback(bg, id.writer, id.epoch)
			history = append(history, fmt.Sprintf("rollback %s: %v", id, err))
			if err == nil {
				m.aborted = true
			}
		case 8, 9: // the client crashed; a new one replays the epoch
			id, m, ok := pick(writer)
			if !ok || m.committed || m.decided || maxCommitted[writer] > id.epoch {
				continue
			}
			conns++
			ctx := WithConn(bg, fmt.Sprintf("replay:%d", conns))
			if op == 8 { // with a begin, which fences
				st, err := fx.c.Begin(ctx, id.writer, id.epoch, 0)
				history = append(history, fmt.Sprintf("replay %s: begin: %v", id, err))
				if err != nil {
					continue
				}
				ctx = WithAttempt(ctx, st.Attempt)
				m.endpoints, m.precommitted, m.aborted = map[string]bool{}, false, false
			}
			ep := endpoints[rng.IntN(2)]
			s, err := fx.c.Join(ctx, id.writer, id.epoch, ep)
			history = append(history, fmt.Sprintf("replay %s: put %s: %v", id, ep, err))
			if err != nil {
				continue
			}
			if s.Replayed() {
				t.Fatalf("seed %d: replay of uncommitted %s answered replayed\n%s", seed, id, strings.Join(history, "\n"))
			}
			s.Done(1, nil)
			if op == 9 { // the first put began a new attempt
				m.endpoints, m.precommitted, m.aborted = map[string]bool{}, false, false
			}
			m.endpoints[ep] = true
		case 7:
			switch rng.IntN(3) {
			case 0:
				history = append(history, "restart")
				fx.restart()
				for _, m := range txns {
					if !m.precommitted && !m.committed {
						m.aborted = true
					}
				}
			case 1: // a sink fails commits until the next restart or reset
				ep := endpoints[rng.IntN(2)]
				history = append(history, "fail commits on "+ep)
				fx.eps[ep].set(func(f *fakeWriter) { f.failCommit = writers.Errorf(writers.ErrUnavailable, "injected") })
			default:
				history = append(history, "sinks healthy")
				for _, ep := range endpoints {
					fx.eps[ep].set(func(f *fakeWriter) { f.failCommit = nil })
				}
			}
		}
		check()
	}
}

// A sink that panics in Precommit or Commit fails that call, not the
// process: the goroutines the coordinator starts for sink calls are not
// gRPC handlers. A panicking commit keeps its decision and finishes once.
func TestSinkPanicsFailTheCall(t *testing.T) {
	fx := newFixture(t)
	a := fx.eps["a"]
	fx.write("w", 1, "a", 1)
	a.set(func(f *fakeWriter) { f.panicPrecommit = true })
	var pe *writers.PanicError
	if _, err := fx.c.Precommit(bg, "w", 1); !errors.As(err, &pe) {
		t.Fatalf("precommit with a panicking sink: %v, want a *writers.PanicError", err)
	}
	fx.mustState("w", 1, StateOpen)
	a.set(func(f *fakeWriter) { f.panicPrecommit, f.panicCommit = false, true })
	if _, err := fx.c.Precommit(bg, "w", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.c.Commit(bg, "w", 1, nil); !errors.As(err, &pe) {
		t.Fatalf("commit with a panicking sink: %v, want a *writers.PanicError", err)
	}
	a.set(func(f *fakeWriter) { f.panicCommit = false })
	if st, err := fx.c.Commit(bg, "w", 1, nil); err != nil || st.State != StateCommitted {
		t.Fatalf("commit retry: %+v %v", st, err)
	}
	if _, n, _, _ := a.counts(); n != 1 {
		t.Fatalf("%d sink commits, want 1", n)
	}
}

// A commit of an epoch this server never saw, from handed descriptors,
// refused because an older epoch is still precommitted leaves nothing
// behind: no phantom transaction (unknown to status, never expiring) that
// blocks the writer's later commits as "still precommitted".
func TestRefusedHandedCommitLeavesNoTransaction(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 5, "a", 1)
	if _, err := fx.c.Precommit(bg, "w", 5); err != nil {
		t.Fatal(err)
	}
	handed := map[string][]writers.Descriptor{"b": {[]byte("peer-w@6")}}
	if _, err := fx.c.Commit(bg, "w", 6, handed); !errors.Is(err, writers.ErrWrongState) {
		t.Fatalf("commit 6 from handed descriptors before 5: %v, want ErrWrongState", err)
	}
	// The orchestrator gives epoch 6 up: it commits 5, then writes 7.
	if _, err := fx.c.Commit(bg, "w", 5, nil); err != nil {
		t.Fatal(err)
	}
	fx.write("w", 7, "a", 1)
	if _, err := fx.c.Precommit(bg, "w", 7); err != nil {
		t.Fatal(err)
	}
	if st, err := fx.c.Commit(bg, "w", 7, nil); err != nil || st.State != StateCommitted {
		t.Fatalf("commit 7: %+v %v (blocked by the refused commit of 6?)", st, err)
	}
}

// Handed-over descriptors a sink would refuse are refused before the
// commit is decided: decided, the transaction could no longer be rolled
// back and would stay half published (its own endpoint committed, the
// handed one failing forever).
func TestHandedDescriptorsCheckedBeforeTheDecision(t *testing.T) {
	fx := newFixture(t)
	a, b := fx.eps["a"], fx.eps["b"]
	fx.write("w", 1, "a", 1)
	if _, err := fx.c.Precommit(bg, "w", 1); err != nil {
		t.Fatal(err)
	}
	b.set(func(f *fakeWriter) { f.failCheck = writers.Errorf(writers.ErrInvalid, "file gone") })
	handed := map[string][]writers.Descriptor{"b": {writers.Descriptor("b/w@1 from another server")}}
	if _, err := fx.c.Commit(bg, "w", 1, handed); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "nothing was decided") {
		t.Fatalf("commit with a bad handed descriptor: %v, want ErrInvalid before the decision", err)
	}
	if _, n, _, _ := a.counts(); n != 0 {
		t.Fatalf("endpoint a published %d commits of a refused transaction", n)
	}
	fx.mustState("w", 1, StatePrecommitted)
	if _, err := fx.c.Rollback(bg, "w", 1); err != nil {
		t.Fatalf("rollback after the refusal: %v", err)
	}
	// A transaction this server never saw is not left behind either.
	if _, err := fx.c.Commit(bg, "w", 2, handed); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("commit of an unknown transaction with a bad handed descriptor: %v", err)
	}
	if _, err := fx.c.Status(bg, "w", 2); !errors.Is(err, writers.ErrNotFound) {
		t.Fatalf("status of the refused unknown transaction: %v, want NotFound", err)
	}
	b.set(func(f *fakeWriter) { f.failCheck = nil })
	if st, err := fx.c.Commit(bg, "w", 2, handed); err != nil || st.State != StateCommitted {
		t.Fatalf("commit once the descriptors check: %+v %v", st, err)
	}
}

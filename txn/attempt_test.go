package txn

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quiver-ingest/quiver/writers"
)

// putOn joins (writer, epoch) on endpoint from connection conn, naming
// attempt when not "", writes rows and ends the stream.
func (fx *fixture) putOn(conn, attempt, writer string, epoch int64, endpoint string, rows int64) error {
	fx.t.Helper()
	s, err := fx.c.Join(WithAttempt(WithConn(bg, conn), attempt), writer, epoch, endpoint)
	if err != nil {
		return err
	}
	return s.Done(rows, nil)
}

// rowsOf sums the rows of st's participants.
func rowsOf(st Status) int64 {
	var n int64
	for _, p := range st.Participants {
		n += p.Rows
	}
	return n
}

func wantWrongState(t *testing.T, err error, contains string) {
	t.Helper()
	if !errors.Is(err, writers.ErrWrongState) || !strings.Contains(err.Error(), contains) {
		t.Fatalf("error %v, want wrong state containing %q", err, contains)
	}
}

// TestReplayByANewClientFencesTheOldAttempt: a client stages rows and dies
// before precommit; the replay of the epoch by a new client (another
// connection) does not join what the dead one staged: its begin fences
// the old attempt and only the replay's rows are committed. A replay's
// put naming no attempt is refused while the dead attempt holds
// acknowledged rows (neither joined nor silently dropped), and begins a
// new attempt when the dead client's stream was cut before any row was
// acknowledged. Before attempts the replay's put joined the dead client's
// transaction and the commit published both (the batch twice).
func TestReplayByANewClientFencesTheOldAttempt(t *testing.T) {
	fx := newFixture(t)
	if err := fx.putOn("dead:1", "", "q", 7, "a", 100); err != nil {
		t.Fatal(err)
	}
	old := fx.status("q", 7).Attempt
	wantWrongState(t, fx.putOn("new:2", "", "q", 7, "a", 100), "begin the epoch again")
	st, err := fx.c.Begin(WithConn(bg, "new:2"), "q", 7, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.putOn("new:2", st.Attempt, "q", 7, "a", 100); err != nil {
		t.Fatal(err)
	}
	st = fx.status("q", 7)
	if st.Attempt == old || rowsOf(st) != 100 {
		t.Fatalf("after the replay: attempt %q (old %q), %d rows staged; want a new attempt with the replay's 100 rows", st.Attempt, old, rowsOf(st))
	}
	if _, _, rollbacks, _ := fx.eps["a"].counts(); rollbacks == 0 {
		t.Fatal("the dead client's staged rows were not rolled back")
	}
	if _, err := fx.c.Precommit(bg, "q", 7); err != nil {
		t.Fatal(err)
	}
	if st, err := fx.c.Commit(bg, "q", 7, nil); err != nil || rowsOf(st) != 100 {
		t.Fatalf("commit: %+v, %v; want 100 rows", st, err)
	}

	// A client cut off mid-stream acknowledged nothing: the replay's put
	// begins a new attempt and the cut stream ends with the abort.
	cut, err := fx.c.Join(WithConn(bg, "dead:3"), "q", 8, "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx := cut.Context(bg)
	ended := make(chan error, 1)
	go func() { // its handler ends once its context is cut off
		<-ctx.Done()
		ended <- cut.Done(0, nil)
	}()
	if err := fx.putOn("new:4", "", "q", 8, "a", 10); err != nil {
		t.Fatalf("the replay's put after a cut stream: %v", err)
	}
	wantWrongState(t, <-ended, "aborted")
	if st := fx.mustState("q", 8, StateOpen); rowsOf(st) != 10 {
		t.Fatalf("%d rows staged, want the replay's 10", rowsOf(st))
	}
}

// TestBeginAfterPrecommitFencesOrAdopts: a client precommits and dies
// before commit. The replay's begin rolls the precommitted attempt back
// and starts clean (before attempts the replay's put was refused and the
// epoch stuck); Adopt keeps it so that it can be committed.
func TestBeginAfterPrecommitFencesOrAdopts(t *testing.T) {
	fx := newFixture(t)
	if err := fx.putOn("dead:1", "", "q", 7, "a", 100); err != nil {
		t.Fatal(err)
	}
	pre, err := fx.c.Precommit(bg, "q", 7)
	if err != nil {
		t.Fatal(err)
	}
	adopted, err := fx.c.Adopt(WithConn(bg, "new:2"), "q", 7, 0)
	if err != nil || adopted.State != StatePrecommitted || adopted.Attempt != pre.Attempt {
		t.Fatalf("Adopt = %+v, %v; want the precommitted attempt %s", adopted, err, pre.Attempt)
	}
	st, err := fx.c.Begin(WithConn(bg, "new:2"), "q", 7, 0)
	if err != nil || st.State != StateOpen || st.Attempt == pre.Attempt {
		t.Fatalf("Begin = %+v, %v; want a new open attempt", st, err)
	}
	// The fenced attempt can no longer be committed, by this server nor
	// through its descriptors handed over.
	_, err = fx.c.Commit(WithAttempt(bg, pre.Attempt), "q", 7, nil)
	wantWrongState(t, err, "is not the current attempt")
	if err := fx.putOn("new:2", st.Attempt, "q", 7, "a", 60); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.c.Precommit(WithAttempt(bg, st.Attempt), "q", 7); err != nil {
		t.Fatal(err)
	}
	stale := map[string][]writers.Descriptor{"b": {[]byte("from the fenced attempt")}}
	_, err = fx.c.Commit(WithHandedAttempts(bg, map[string][]string{"b": {pre.Attempt}}), "q", 7, stale)
	wantWrongState(t, err, "was fenced or rolled back")
	done, err := fx.c.Commit(WithAttempt(bg, st.Attempt), "q", 7, nil)
	if err != nil || done.State != StateCommitted || rowsOf(done) != 60 {
		t.Fatalf("commit = %+v, %v; want the replay's 60 rows committed", done, err)
	}
}

// TestStaleAttemptIsRefused: an attempt superseded by a later begin can
// neither join nor precommit, and its rollback leaves the current attempt
// alone (a client's context manager rolls back only its own attempt).
func TestStaleAttemptIsRefused(t *testing.T) {
	fx := newFixture(t)
	first, err := fx.c.Begin(WithConn(bg, "c:1"), "q", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	second, err := fx.c.Begin(WithConn(bg, "c:2"), "q", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = fx.putOn("c:1", first.Attempt, "q", 1, "a", 1)
	wantWrongState(t, err, "is not the current attempt")
	_, err = fx.c.Precommit(WithAttempt(bg, first.Attempt), "q", 1)
	wantWrongState(t, err, "is not the current attempt")
	if err := fx.putOn("c:2", second.Attempt, "q", 1, "a", 5); err != nil {
		t.Fatal(err)
	}
	if st, err := fx.c.Rollback(WithAttempt(bg, first.Attempt), "q", 1); err != nil || st.State != StateOpen || st.Attempt != second.Attempt {
		t.Fatalf("rollback of the stale attempt = %+v, %v; want the current attempt untouched", st, err)
	}
	// A put naming no attempt from the connection that began the current
	// one joins it.
	if err := fx.putOn("c:2", "", "q", 1, "b", 3); err != nil {
		t.Fatal(err)
	}
	if st := fx.status("q", 1); st.Attempt != second.Attempt || rowsOf(st) != 8 {
		t.Fatalf("status = %+v; want attempt %s with 8 rows", st, second.Attempt)
	}
}

// TestFirstPutBeginsAfterRestartAndExpiry: an open transaction is aborted
// when the server restarts, and when its ttl expires; the replay's first
// put begins a new attempt instead of failing forever with "was aborted".
func TestFirstPutBeginsAfterRestartAndExpiry(t *testing.T) {
	fx := newFixture(t)
	if err := fx.putOn("c:1", "", "q", 3, "a", 10); err != nil {
		t.Fatal(err)
	}
	fx.restart()
	fx.mustState("q", 3, StateAborted)
	if err := fx.putOn("c:2", "", "q", 3, "a", 10); err != nil {
		t.Fatalf("the replay's put after a restart: %v", err)
	}
	fx.mustState("q", 3, StateOpen)
	fx.clock.Advance(2 * fx.c.ttl)
	fx.c.expireNow(fx.clock.Now())
	fx.mustState("q", 3, StateAborted)
	if err := fx.putOn("c:2", "", "q", 3, "a", 10); err != nil {
		t.Fatalf("the replay's put after expiry: %v", err)
	}
	if st := fx.mustState("q", 3, StateOpen); rowsOf(st) != 10 {
		t.Fatalf("%d rows staged, want the replay's 10", rowsOf(st))
	}
}

// TestReplayOfOtherDataIsDetected: a replay of a committed epoch that
// sends another number of rows than the commit published (a second
// pipeline using the same writer name) is counted and logged, and with
// ReplayRefuse its commit fails naming the counts; a faithful replay
// answers replayed as before.
func TestReplayOfOtherDataIsDetected(t *testing.T) {
	for _, check := range []ReplayCheck{ReplayWarn, ReplayRefuse} {
		t.Run(string(check), func(t *testing.T) {
			fx := newFixture(t)
			fx.c.replayCheck = check
			fx.write("q", 1, "a", 5)
			if _, err := fx.c.Precommit(bg, "q", 1); err != nil {
				t.Fatal(err)
			}
			if _, err := fx.c.Commit(bg, "q", 1, nil); err != nil {
				t.Fatal(err)
			}
			fx.write("q", 1, "a", 5) // faithful
			if st, err := fx.c.Commit(bg, "q", 1, nil); err != nil || !st.Replayed {
				t.Fatalf("faithful replay: %+v, %v", st, err)
			}
			fx.write("q", 1, "a", 7) // another pipeline's epoch 1
			st, err := fx.c.Commit(bg, "q", 1, nil)
			if check == ReplayRefuse {
				wantWrongState(t, err, `endpoint "a": 5 rows committed, 7 replayed`)
			} else if err != nil || !st.Replayed {
				t.Fatalf("replay of other data under warn: %+v, %v; want replayed", st, err)
			}
			if n := testutil.ToFloat64(fx.c.metrics.replayMismatches); n != 1 {
				t.Fatalf("replay mismatches counted %v, want 1", n)
			}
		})
	}
}

// writeDigested is fx.write with the rows' digest given.
func (fx *fixture) writeDigested(writer string, epoch int64, endpoint string, rows int64, digest uint64) {
	fx.t.Helper()
	s, err := fx.c.Join(bg, writer, epoch, endpoint)
	if err != nil {
		fx.t.Fatal(err)
	}
	s.SetDigest(digest)
	if err := s.Done(rows, nil); err != nil {
		fx.t.Fatal(err)
	}
}

// TestReplayOfOtherRowsIsDetectedByDigest: a replay that sends as many
// rows as the epoch committed, but other ones, is told apart by the rows'
// digest (the sum of the streams' digests, so two streams splitting the
// rows differently digest the same), after a restart too (the journal
// keeps it). A stream that gives no digest is compared by count only.
func TestReplayOfOtherRowsIsDetectedByDigest(t *testing.T) {
	fx := newFixture(t)
	fx.c.replayCheck = ReplayRefuse
	fx.writeDigested("q", 1, "a", 3, 100)
	fx.writeDigested("q", 1, "a", 2, 23)
	if _, err := fx.c.Precommit(bg, "q", 1); err != nil {
		t.Fatal(err)
	}
	fx.restart() // the precommit record carries the digest
	fx.c.replayCheck = ReplayRefuse
	if _, err := fx.c.Commit(bg, "q", 1, nil); err != nil {
		t.Fatal(err)
	}
	fx.writeDigested("q", 1, "a", 5, 123) // the same rows in one stream
	if st, err := fx.c.Commit(bg, "q", 1, nil); err != nil || !st.Replayed {
		t.Fatalf("faithful replay: %+v, %v", st, err)
	}
	fx.writeDigested("q", 1, "a", 5, 124) // as many rows, other ones
	_, err := fx.c.Commit(bg, "q", 1, nil)
	wantWrongState(t, err, `endpoint "a": 5 rows committed and replayed, but other rows (digest 000000000000007b committed, 000000000000007c replayed)`)
	fx.write("q", 1, "a", 5) // no digest: counts only
	if st, err := fx.c.Commit(bg, "q", 1, nil); err != nil || !st.Replayed {
		t.Fatalf("replay without a digest: %+v, %v", st, err)
	}
	if n := testutil.ToFloat64(fx.c.metrics.replayMismatches); n != 1 {
		t.Fatalf("replay mismatches counted %v, want 1", n)
	}
}

// TestAttemptSurvivesRestartAndCompaction: a precommitted attempt keeps
// its id across a journal compaction and a restart, so that a client
// naming it commits it. (The compaction's snapshot dropped the id: the
// restarted server refused the client's own attempt as stale.)
func TestAttemptSurvivesRestartAndCompaction(t *testing.T) {
	fx := newFixture(t)
	fx.c.Close()
	fx.c = nil
	fx.tune = func(c *Coordinator) { c.segmentBytes = 4 << 10 } // so that a compaction restates the attempt
	fx.open()
	st, err := fx.c.Begin(bg, "w", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	fx.write("w", 3, "a", 2)
	if _, err := fx.c.Precommit(WithAttempt(bg, st.Attempt), "w", 3); err != nil {
		t.Fatal(err)
	}
	fx.fillUntilCompacted()
	fx.restart()
	if got := fx.mustState("w", 3, StatePrecommitted); got.Attempt != st.Attempt {
		t.Fatalf("attempt after compaction and restart %q, want %q", got.Attempt, st.Attempt)
	}
	if done, err := fx.c.Commit(WithAttempt(bg, st.Attempt), "w", 3, nil); err != nil || done.State != StateCommitted {
		t.Fatalf("commit of the attempt after restart: %+v, %v", done, err)
	}
}

// discardedOf returns the descriptors whose precommitted files endpoint's
// sink was told to delete.
func (fx *fixture) discardedOf(endpoint string) []string {
	f := fx.eps[endpoint]
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, d := range f.discarded {
		out = append(out, string(d))
	}
	return out
}

// TestAbortedPrecommitsDeleteTheirFiles: when no other server can hold
// this server's descriptors (Options.DiscardPrecommitted), a precommitted
// attempt that is rolled back, fenced by a new begin, expired, or rolled
// back after a restart has its precommit's files deleted by the sink; one
// whose decided commit every sink refused leaves them to vacuum (its undoing
// rests on the sinks' memory of committed epochs); an open one only rolls
// back, and with a shared key nothing is deleted.
func TestAbortedPrecommitsDeleteTheirFiles(t *testing.T) {
	precommit := func(fx *fixture, writer string) {
		t.Helper()
		fx.write(writer, 1, "a", 3)
		if _, err := fx.c.Precommit(bg, writer, 1); err != nil {
			t.Fatal(err)
		}
	}
	fx := newFixture(t)
	fx.c.discardPrecommits = true
	fx.tune = func(c *Coordinator) { c.discardPrecommits = true }

	precommit(fx, "rolled")
	if _, err := fx.c.Rollback(bg, "rolled", 1); err != nil {
		t.Fatal(err)
	}
	precommit(fx, "fenced")
	if _, err := fx.c.Begin(bg, "fenced", 1, 0); err != nil {
		t.Fatal(err)
	}
	precommit(fx, "expired")
	fx.clock.Advance(2 * time.Minute)
	fx.c.expireNow(fx.clock.Now())
	precommit(fx, "restarted")
	fx.restart()
	if _, err := fx.c.Rollback(bg, "restarted", 1); err != nil {
		t.Fatal(err)
	}
	precommit(fx, "refused")
	fx.eps["a"].set(func(f *fakeWriter) { f.failCommit = writers.Errorf(writers.ErrConflict, "a concurrent commit won") })
	if _, err := fx.c.Commit(bg, "refused", 1, nil); !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("refused commit: %v", err)
	}
	fx.eps["a"].set(func(f *fakeWriter) { f.failCommit = nil })
	fx.write("open", 1, "a", 3)
	if _, err := fx.c.Rollback(bg, "open", 1); err != nil {
		t.Fatal(err)
	}
	want := []string{"a/rolled@1", "a/fenced@1", "a/expired@1", "a/restarted@1"}
	if got := fx.discardedOf("a"); !slices.Equal(got, want) {
		t.Fatalf("discarded %q, want %q", got, want)
	}

	shared := newFixture(t)
	precommit(shared, "w")
	if _, err := shared.c.Rollback(bg, "w", 1); err != nil {
		t.Fatal(err)
	}
	if got := shared.discardedOf("a"); len(got) != 0 {
		t.Fatalf("with a shared key, discarded %q, want nothing (vacuum's)", got)
	}
}

// A precommit's files a sink failed to delete are deleted by the next
// Rollback of the aborted transaction.
func TestFailedDiscardIsRetriedByRollback(t *testing.T) {
	fx := newFixture(t)
	fx.c.discardPrecommits = true
	fx.write("w", 1, "a", 3)
	if _, err := fx.c.Precommit(bg, "w", 1); err != nil {
		t.Fatal(err)
	}
	a := fx.eps["a"]
	a.mu.Lock()
	a.failDiscard = errors.New("bucket unreachable")
	a.mu.Unlock()
	if _, err := fx.c.Rollback(bg, "w", 1); err != nil {
		t.Fatal(err)
	}
	if got := fx.discardedOf("a"); len(got) != 0 {
		t.Fatalf("discarded %q while the sink fails", got)
	}
	a.mu.Lock()
	a.failDiscard = nil
	a.mu.Unlock()
	for range 2 { // the second finds nothing left to retry
		if _, err := fx.c.Rollback(bg, "w", 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := fx.discardedOf("a"); !slices.Equal(got, []string{"a/w@1"}) {
		t.Fatalf("discarded %q after the retry, want [a/w@1]", got)
	}
}

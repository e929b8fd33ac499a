package txn

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quiver-ingest/quiver/writers"
)

var update = flag.Bool("update", false, "rewrite the golden journal in testdata")

func TestRestartKeepsPrecommitted(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 7)
	pre, err := fx.c.Precommit(bg, "w", 1)
	if err != nil {
		t.Fatal(err)
	}
	fx.restart()
	st := fx.mustState("w", 1, StatePrecommitted)
	if !st.Deadline.Equal(pre.Deadline) || st.Participants[0].Rows != 7 || string(st.Participants[0].Descriptor) != "a/w@1" {
		t.Fatalf("after restart %+v, before %+v", st, pre)
	}
	// The sink gets the recovered part to protect (writers.PrecommitKeeper).
	if k := fx.eps["a"].keeps; len(k) != 1 || k[0].key != (writers.TxnKey{Writer: "w", Epoch: 1}) || len(k[0].descs) != 1 || string(k[0].descs[0]) != "a/w@1" {
		t.Fatalf("keeps after restart: %+v, want w@1 with a/w@1", k)
	}
	for range 2 {
		if st, err := fx.c.Commit(bg, "w", 1, nil); err != nil || st.State != StateCommitted {
			t.Fatalf("commit: %+v %v", st, err)
		}
	}
	if _, n, _, _ := fx.eps["a"].counts(); n != 1 {
		t.Fatalf("sink commits %d, want exactly 1", n)
	}
	// Committed epochs survive a restart: replays need no sink.
	fx.restart()
	_, _, _, before := fx.eps["a"].counts()
	if s, err := fx.c.Join(bg, "w", 1, "a"); err != nil || !s.Replayed() {
		t.Fatalf("join after restart: %v", err)
	}
	if _, _, _, calls := fx.eps["a"].counts(); calls != before {
		t.Fatalf("CommittedEpoch called %d times after the restart", calls-before)
	}
}

// TestRestartLongerThanTTLKeepsPrecommitted: a server down for longer than
// the TTL keeps its precommitted transactions for a TTL from its restart
// (their clients could not commit meanwhile) instead of rolling them back
// at once; the TTL still expires them after that.
func TestRestartLongerThanTTLKeepsPrecommitted(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 7)
	if _, err := fx.c.Precommit(bg, "w", 1); err != nil {
		t.Fatal(err)
	}
	fx.clock.Advance(3 * fx.c.ttl) // the outage
	fx.restart()
	fx.c.expireNow(fx.clock.Now())
	st := fx.mustState("w", 1, StatePrecommitted)
	if want := fx.clock.Now().Add(fx.c.ttl); !st.Deadline.Equal(want) {
		t.Fatalf("deadline after the restart %v, want %v", st.Deadline, want)
	}
	fx.clock.Advance(fx.c.ttl)
	fx.c.expireNow(fx.clock.Now())
	fx.mustState("w", 1, StateAborted)

	// Never past MaxTTL from its precommit: vacuum may take older files.
	fx.write("v", 1, "a", 7)
	if _, err := fx.c.Precommit(bg, "v", 1); err != nil {
		t.Fatal(err)
	}
	fx.clock.Advance(MaxTTL)
	fx.restart()
	fx.c.expireNow(fx.clock.Now())
	fx.mustState("v", 1, StateAborted)
}

func TestRestartAbortsOpen(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 1)
	fx.write("w", 1, "b", 1)
	fx.c.Join(bg, "v", 2, "a") // a stream cut by the crash
	fx.restart()
	fx.mustState("w", 1, StateAborted)
	fx.mustState("v", 2, StateAborted)
	if _, _, n, _ := fx.eps["a"].counts(); n != 2 {
		t.Fatalf("a rollbacks %d, want 2", n)
	}
	if _, _, n, _ := fx.eps["b"].counts(); n != 1 {
		t.Fatalf("b rollbacks %d, want 1", n)
	}
}

// TestBeginRetriesFailedRollback: an epoch aborted by a restart while its
// sink could not roll back can be begun again once the sink is back: the
// begin retries the rollback (it used to refuse until the retention
// dropped the transaction).
func TestBeginRetriesFailedRollback(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 1)
	fx.eps["a"].set(func(f *fakeWriter) { f.failRollback = writers.Errorf(writers.ErrUnavailable, "storage down") })
	fx.restart()
	fx.mustState("w", 1, StateAborted)
	if _, err := fx.c.Begin(bg, "w", 1, 0); !errors.Is(err, writers.ErrUnavailable) || !strings.Contains(err.Error(), "storage down") {
		t.Fatalf("begin while the sink is down: %v, want Unavailable naming the cause", err)
	}
	// Past the retention the transaction is kept: its rollback is owed.
	fx.clock.Advance(2 * fx.c.retention)
	fx.c.expireNow(fx.clock.Now())
	fx.eps["a"].set(func(f *fakeWriter) { f.failRollback = nil })
	if _, err := fx.c.Begin(bg, "w", 1, 0); err != nil {
		t.Fatalf("begin once the sink is back: %v", err)
	}
	if _, _, rollbacks, _ := fx.eps["a"].counts(); rollbacks != 1 {
		t.Fatalf("%d rollbacks of the aborted attempt, want 1", rollbacks)
	}
	fx.write("w", 1, "a", 1)
	fx.c.Precommit(bg, "w", 1)
	if st, err := fx.c.Commit(bg, "w", 1, nil); err != nil || st.State != StateCommitted || st.Replayed {
		t.Fatalf("replayed epoch: %+v %v, want it committed afresh", st, err)
	}

	// Not for ever: a rollback failing for a day is left to vacuum.
	fx.write("v", 1, "a", 1)
	fx.eps["a"].set(func(f *fakeWriter) { f.failRollback = writers.Errorf(writers.ErrUnavailable, "storage down") })
	fx.c.Rollback(bg, "v", 1)
	fx.clock.Advance(owedRollbackKeep)
	fx.c.expireNow(fx.clock.Now())
	fx.c.mu.Lock()
	_, kept := fx.c.txns[txnID{"v", 1}]
	fx.c.mu.Unlock()
	if kept {
		t.Fatal("an aborted transaction owing a rollback for a day is still kept")
	}
}

// TestExpiryKeepsFinishedTransactionsForTheRetention: with a TTL longer
// than a day (so a retention longer than a day), finished transactions
// owing nothing are kept for the whole retention, not dropped at a day.
func TestExpiryKeepsFinishedTransactionsForTheRetention(t *testing.T) {
	fx := newFixture(t)
	fx.c.retention = 3 * owedRollbackKeep
	fx.write("w", 1, "a", 1)
	fx.c.Precommit(bg, "w", 1)
	if _, err := fx.c.Commit(bg, "w", 1, nil); err != nil {
		t.Fatal(err)
	}
	fx.clock.Advance(2 * owedRollbackKeep)
	fx.c.expireNow(fx.clock.Now())
	fx.mustState("w", 1, StateCommitted)
}

func TestRestartFinishesDecidedCommit(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 1)
	fx.write("w", 1, "b", 1)
	fx.c.Precommit(bg, "w", 1)
	fx.eps["b"].set(func(f *fakeWriter) { f.failCommit = writers.Errorf(writers.ErrUnavailable, "broker down") })
	if _, err := fx.c.Commit(bg, "w", 1, map[string][]writers.Descriptor{"b": {[]byte("peer")}}); !errors.Is(err, writers.ErrUnavailable) {
		t.Fatalf("commit: %v", err)
	}
	fx.c.Close()
	fx.c = nil
	fx.eps["b"].set(func(f *fakeWriter) { f.failCommit = nil })
	fx.open()
	fx.mustState("w", 1, StateCommitted)
	b := fx.eps["b"].commits
	if len(b) != 1 || len(b[0].descs) != 2 || string(b[0].descs[1]) != "peer" {
		t.Fatalf("b commits %+v", b)
	}
	if _, n, _, _ := fx.eps["a"].counts(); n != 1 {
		t.Fatalf("a commits %d (idempotent retry must not double)", n)
	}
}

// TestRestartKeepsDecisionForMissingEndpoint: a decided commit with an
// endpoint no longer configured is kept, and its other endpoints wait for
// it (the missing one may be an upsert a concurrent commit can refuse: it
// must not be left half published); restored, the commit finishes.
func TestRestartKeepsDecisionForMissingEndpoint(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 1)
	fx.write("w", 1, "b", 1)
	fx.c.Precommit(bg, "w", 1)
	fx.eps["b"].set(func(f *fakeWriter) { f.failCommit = writers.Errorf(writers.ErrUnavailable, "down") })
	fx.eps["a"].set(func(f *fakeWriter) { f.failCommit = writers.Errorf(writers.ErrUnavailable, "down") })
	fx.c.Commit(bg, "w", 1, nil)
	fx.eps["a"].set(func(f *fakeWriter) { f.failCommit = nil })
	fx.c.Close()
	fx.c = nil
	b := fx.eps["b"]
	delete(fx.eps, "b")
	fx.open()
	fx.mustState("w", 1, StatePrecommitted)
	if _, commits, _, _ := fx.eps["a"].counts(); commits != 0 {
		t.Fatalf("endpoint a committed %d times while b is missing, want 0", commits)
	}
	b.set(func(f *fakeWriter) { f.failCommit = nil })
	fx.eps["b"] = b
	if st, err := fx.c.Commit(bg, "w", 1, nil); err != nil || st.State != StateCommitted {
		t.Fatalf("commit once the endpoint is back: %+v %v", st, err)
	}
}

func TestCompactionKeepsState(t *testing.T) {
	fx := newFixture(t)
	fx.c.Close()
	fx.c = nil
	fx.tune = func(c *Coordinator) { c.segmentBytes = 4 << 10 }
	fx.open()
	for e := range int64(60) {
		fx.write("w", e, "a", 1)
		fx.c.Precommit(bg, "w", e)
		if _, err := fx.c.Commit(bg, "w", e, nil); err != nil {
			t.Fatal(err)
		}
	}
	fx.write("p", 1, "b", 3)
	fx.c.Precommit(bg, "p", 1)
	fx.write("d", 1, "b", 1)
	fx.c.Precommit(bg, "d", 1)
	fx.eps["b"].set(func(f *fakeWriter) { f.failCommit = writers.Errorf(writers.ErrUnavailable, "down") })
	fx.c.Commit(bg, "d", 1, nil)
	fx.write("o", 1, "a", 1)
	// Push past the segment size once more with the live state in place.
	for e := range int64(20) {
		fx.c.Begin(bg, "filler", e, 0)
	}
	segs, _ := filepath.Glob(filepath.Join(fx.dir, "*.journal"))
	if len(segs) != 1 || filepath.Base(segs[0]) == "00000001.journal" {
		t.Fatalf("segments %v: want one compacted segment", segs)
	}
	fx.c.Close()
	fx.c = nil
	fx.eps["b"].set(func(f *fakeWriter) { f.failCommit = nil })
	fx.open()
	fx.mustState("p", 1, StatePrecommitted)
	fx.mustState("d", 1, StateCommitted)
	fx.mustState("o", 1, StateAborted)
	_, _, _, before := fx.eps["a"].counts()
	if s, err := fx.c.Join(bg, "w", 59, "a"); err != nil || !s.Replayed() {
		t.Fatalf("join of a committed epoch after compaction: %v", err)
	}
	if _, _, _, calls := fx.eps["a"].counts(); calls != before {
		t.Fatalf("the sink was asked for an epoch the compacted journal knows")
	}
	if st, err := fx.c.Commit(bg, "p", 1, nil); err != nil || st.Participants[0].Rows != 3 {
		t.Fatalf("commit of a snapshotted precommit: %+v %v", st, err)
	}
}

func TestSecondCoordinatorOnSameDirFails(t *testing.T) {
	fx := newFixture(t)
	if _, err := Open(bg, Options{Dir: fx.dir}, fx.eps); err == nil {
		t.Fatal("a second coordinator opened a locked journal")
	}
}

func TestOpenRefusesCorruptJournal(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 1)
	fx.write("w", 2, "a", 1)
	fx.c.Close()
	fx.c = nil
	seg := filepath.Join(fx.dir, "00000001.journal")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	data[16+12+3] ^= 0x40 // inside the first record's payload
	if err := os.WriteFile(seg, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(bg, Options{Dir: fx.dir}, fx.eps)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Segment != seg || ce.Offset != 16 {
		t.Fatalf("Open: %v, want corruption of %s at 16", err, seg)
	}
}

func TestGoldenJournal(t *testing.T) {
	fx := newFixture(t)
	fx.write("job", 1, "a", 2)
	fx.write("job", 1, "b", 3)
	fx.clock.Advance(time.Second)
	fx.c.Precommit(bg, "job", 1)
	fx.c.Commit(bg, "job", 1, map[string][]writers.Descriptor{"b": {[]byte("peer")}})
	fx.write("job", 2, "a", 1)
	fx.c.Rollback(bg, "job", 2)
	fx.c.Close()
	fx.c = nil
	got, err := os.ReadFile(filepath.Join(fx.dir, "00000001.journal"))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "golden.journal")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGoldenJournal -update)", err)
	}
	if string(got) != string(want) {
		t.Fatalf("journal bytes differ from %s (format change? update the golden file and docs/journal-format.md together)\n got %q\nwant %q", golden, got, want)
	}
	goldenOpens(t, fx, want)
}

// TestJournalWithoutAttemptsOpens: a journal written before attempts
// existed (testdata/golden-v1.journal, no "attempt" in its records) still
// opens and says what happened; its transactions have no attempt id.
func TestJournalWithoutAttemptsOpens(t *testing.T) {
	fx := newFixture(t)
	old, err := os.ReadFile(filepath.Join("testdata", "golden-v1.journal"))
	if err != nil {
		t.Fatal(err)
	}
	goldenOpens(t, fx, old)
}

// goldenOpens checks that the journal of TestGoldenJournal, data, opens and
// says what happened.
func goldenOpens(t *testing.T, fx *fixture, data []byte) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "00000001.journal"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Open(bg, Options{Dir: dir, Now: fx.clock.Now}, fx.eps)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if st, _ := c.Status(bg, "job", 1); st.State != StateCommitted || len(st.Participants) != 2 {
		t.Fatalf("golden job@1: %+v", st)
	}
	if st, _ := c.Status(bg, "job", 2); st.State != StateAborted {
		t.Fatalf("golden job@2: %+v", st)
	}
}

// TestResumeAfterEndpointOpens: a decided commit whose endpoint cannot be
// reached at start does not stop recovery; it stays decided and is
// finished by Resume once the endpoint opens, without a client call.
func TestResumeAfterEndpointOpens(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 3)
	fx.write("w", 1, "b", 4)
	if _, err := fx.c.Precommit(bg, "w", 1); err != nil {
		t.Fatal(err)
	}
	down := writers.Errorf(writers.ErrUnavailable, "endpoint \"b\" is unavailable")
	fx.eps["b"].set(func(f *fakeWriter) { f.failCommit = down })
	if _, err := fx.c.Commit(bg, "w", 1, nil); !errors.Is(err, writers.ErrUnavailable) {
		t.Fatalf("commit with b down: %v", err)
	}
	fx.restart() // b is still down: recovery must not fail
	fx.mustState("w", 1, StatePrecommitted)
	// Recovery handed b the decided part it waits for; so does Keep, which
	// the server calls when b opens late, before it serves.
	b := fx.eps["b"]
	for _, when := range []string{"recovery", "Keep"} {
		if when == "Keep" {
			b.keeps = nil
			fx.c.Keep("b", wrapped{b})
		}
		if len(b.keeps) != 1 || len(b.keeps[0].descs) != 1 || string(b.keeps[0].descs[0]) != "b/w@1" {
			t.Fatalf("b keeps after %s: %+v", when, b.keeps)
		}
	}
	fx.c.Resume(bg, "b") // still down: kept
	fx.mustState("w", 1, StatePrecommitted)
	fx.eps["b"].set(func(f *fakeWriter) { f.failCommit = nil })
	fx.c.Resume(bg, "a") // nothing waits for a: a no-op
	fx.c.Resume(bg, "b")
	fx.mustState("w", 1, StateCommitted)
	for _, ep := range []string{"a", "b"} {
		if _, n, _, _ := fx.eps[ep].counts(); n != 1 {
			t.Fatalf("%s: %d sink commits, want 1", ep, n)
		}
	}
}

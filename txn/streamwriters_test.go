package txn

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quiver-ingest/quiver/internal/testpoll"
	"github.com/quiver-ingest/quiver/writers"
)

// TestStreamWriterClaimCompactedByItsOwnAppend: a claim whose own journal
// append starts a compaction is restated by it (a compaction leaves pending
// claims out, and deletes the segment holding the claim's record).
func TestStreamWriterClaimCompactedByItsOwnAppend(t *testing.T) {
	fx := newFixture(t)
	fx.c.Close()
	fx.c = nil
	fx.tune = func(c *Coordinator) { c.segmentBytes = 1 } // every append compacts
	fx.open()
	if err := fx.c.ClaimStreamWriter(bg, "collector"); err != nil {
		t.Fatal(err)
	}
	fx.restart()
	if _, err := fx.c.Begin(bg, "collector", 1, 0); !errors.Is(err, writers.ErrWrongState) {
		t.Fatalf("begin of a stream writer after a compaction and a restart: %v, want ErrWrongState", err)
	}
}

// TestStreamWriterClaim: a writer claimed for continuous streams is
// refused by Begin and Join, before and after a restart and a
// compaction; a writer with epoch transactions cannot be claimed.
func TestStreamWriterClaim(t *testing.T) {
	fx := newFixture(t)
	fx.c.Close()
	fx.c = nil
	fx.tune = func(c *Coordinator) { c.segmentBytes = 4 << 10 }
	fx.open()
	fx.write("job", 1, "a", 1)
	if err := fx.c.ClaimStreamWriter(bg, "job"); !errors.Is(err, writers.ErrWrongState) {
		t.Fatalf("claim of a writer with transactions: %v, want ErrWrongState", err)
	}
	if err := fx.c.ClaimStreamWriter(bg, "collector"); err != nil {
		t.Fatal(err)
	}
	refused := func(when string) {
		t.Helper()
		if _, err := fx.c.Begin(bg, "collector", 3, 0); !errors.Is(err, writers.ErrWrongState) {
			t.Errorf("%s: begin of a stream writer: %v, want ErrWrongState", when, err)
		}
		if _, err := fx.c.Join(bg, "collector", 3, "a"); !errors.Is(err, writers.ErrWrongState) {
			t.Errorf("%s: join of a stream writer: %v, want ErrWrongState", when, err)
		}
		// Nor a commit of descriptors another server precommitted for it.
		if _, err := fx.c.Commit(bg, "collector", 3, map[string][]writers.Descriptor{"a": {[]byte("peer")}}); !errors.Is(err, writers.ErrWrongState) || !strings.Contains(err.Error(), "continuous streams") {
			t.Errorf("%s: commit of handed descriptors of a stream writer: %v, want ErrWrongState", when, err)
		}
	}
	refused("claimed")
	// Also when its sink records a seq at or above the epoch (the
	// committed epoch of a stream writer is its durable seq): not a replay.
	fx.eps["a"].set(func(f *fakeWriter) { f.committed["collector"] = 10 })
	refused("with a durable seq")
	fx.restart()
	refused("after a restart")
	for e := range int64(60) { // past the segment size: a compaction
		fx.c.Begin(bg, "filler", e, 0)
	}
	if segs, _ := filepath.Glob(filepath.Join(fx.dir, "*.journal")); len(segs) != 1 || filepath.Base(segs[0]) == "00000001.journal" {
		t.Fatalf("segments %v: want one compacted segment", segs)
	}
	fx.restart()
	refused("after a compaction and a restart")

	// A writer whose committed epoch the coordinator remembers (past the
	// retention of its transactions) cannot be claimed either.
	fx.write("etl", 5, "a", 1)
	fx.c.Precommit(bg, "etl", 5)
	if _, err := fx.c.Commit(bg, "etl", 5, nil); err != nil {
		t.Fatal(err)
	}
	fx.c.mu.Lock()
	for id, tx := range fx.c.txns {
		if id.writer == "etl" {
			fx.c.dropLocked(tx) // as the retention does
		}
	}
	fx.c.mu.Unlock()
	if err := fx.c.ClaimStreamWriter(bg, "etl"); !errors.Is(err, writers.ErrWrongState) {
		t.Fatalf("claim of a writer with a remembered committed epoch: %v, want ErrWrongState", err)
	}
}

// TestStreamWriterClaimWaitsForTheJournal: a second claim of a writer
// whose first claim is still being journaled answers that claim's
// outcome: a claim the journal refused is nobody's.
func TestStreamWriterClaimWaitsForTheJournal(t *testing.T) {
	fx := newFixture(t)
	fx.c.gate.Lock() // the first claim's journal append waits here
	first := make(chan error, 1)
	go func() { first <- fx.c.ClaimStreamWriter(bg, "collector") }()
	testpoll.Until(t, "the first claim is being journaled", func() bool {
		fx.c.mu.Lock()
		defer fx.c.mu.Unlock()
		return fx.c.claims["collector"] != nil
	})
	second := make(chan error, 1)
	go func() { second <- fx.c.ClaimStreamWriter(bg, "collector") }()
	select {
	case err := <-second:
		t.Fatalf("second claim answered %v while the first was still being journaled", err)
	case <-time.After(200 * time.Millisecond): // it waits, as it should
	}
	fx.c.j.Close() // every append fails from now on
	fx.c.gate.Unlock()
	for name, ch := range map[string]chan error{"first": first, "second": second} {
		if err := <-ch; !errors.Is(err, writers.ErrUnavailable) {
			t.Errorf("%s claim while the journal fails: %v, want ErrUnavailable", name, err)
		}
	}
	if _, err := fx.c.Begin(bg, "collector", 1, 0); err != nil && errors.Is(err, writers.ErrWrongState) {
		t.Errorf("begin after the claim failed: %v: the writer is still claimed", err)
	}
}

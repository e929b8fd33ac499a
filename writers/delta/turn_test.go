package delta

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestCommitTurn: on file:// commits take turns; one that waits longer
// than turnWait for a turn held by a stuck commit goes ahead without it;
// on other stores there is no turn.
func TestCommitTurn(t *testing.T) {
	w := openWriter(t, testConfig(fileURI(t)), memory.DefaultAllocator)
	turn := w.turnFor()
	if turn == nil {
		t.Fatal("no commit turn on file://")
	}
	w.turnWait = 50 * time.Millisecond
	held, err := turn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	release, err := turn(t.Context()) // the turn is held: waits, then goes ahead
	if err != nil {
		t.Fatalf("a commit waiting for a held turn: %v", err)
	}
	if waited := time.Since(start); waited < w.turnWait {
		t.Fatalf("went ahead after %v, before the %v wait", waited, w.turnWait)
	}
	release() // gives back nothing: the stuck commit still holds the turn
	held()
	if release, err = turn(t.Context()); err != nil { // free again at once
		t.Fatal(err)
	}
	release()
	cancelled, cancel := context.WithCancel(t.Context())
	held, _ = turn(t.Context())
	cancel()
	if _, err := turn(cancelled); err == nil {
		t.Fatal("a cancelled wait for the turn: no error")
	}
	held()

	mem := openWriter(t, testConfig("mem://turn-test/t"), memory.DefaultAllocator)
	if mem.turnFor() != nil {
		t.Fatal("a commit turn on mem://: object stores race as before")
	}
}

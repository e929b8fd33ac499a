package tablesink

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quiver-ingest/quiver/writers"
)

// TestPins: optimize's commit waits for a plan under way and then sees
// its pins; a repeated plan adds to them; Unpin forgets them.
func TestPins(t *testing.T) {
	ctx := context.Background()
	p := newPins[uint64]()
	key := writers.TxnKey{Writer: "job", Epoch: 1}
	if err := p.BeginPlan(ctx); err != nil {
		t.Fatal(err)
	}
	saw := make(chan map[uint64]bool)
	go func() {
		_ = p.Commit(ctx, func(pinned map[uint64]bool) error {
			saw <- pinned
			return nil
		})
	}()
	select {
	case <-saw:
		t.Fatal("optimize committed while a merge was being planned")
	case <-time.After(50 * time.Millisecond): // a negative check: it must not happen
	}
	p.EndPlan(key, []uint64{3, 4})
	if pinned := <-saw; !pinned[3] || !pinned[4] || len(pinned) != 2 {
		t.Fatalf("optimize's commit saw pins %v, want 3 and 4", pinned)
	}
	if err := p.BeginPlan(ctx); err != nil {
		t.Fatal(err)
	}
	p.EndPlan(key, []uint64{7}) // a repeated precommit adds to the pins
	if got := p.Pinned(); len(got) != 3 {
		t.Fatalf("pins %v, want 3, 4 and 7", got)
	}
	p.Unpin(key)
	if got := p.Pinned(); len(got) != 0 {
		t.Fatalf("pins %v after unpin", got)
	}
}

// TestPinsCommitContext: a Commit waiting for a plan returns when its
// context ends, without running its function, and lets plans in again.
func TestPinsCommitContext(t *testing.T) {
	p := newPins[string]()
	if err := p.BeginPlan(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	ran := false
	err := p.Commit(ctx, func(map[string]bool) error { ran = true; return nil })
	if !errors.Is(err, context.DeadlineExceeded) || ran {
		t.Fatalf("Commit = %v (ran %v); want the context's error, nothing run", err, ran)
	}
	p.EndPlan(writers.TxnKey{}, nil)
	plan, cancelPlan := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelPlan()
	if err := p.BeginPlan(plan); err != nil {
		t.Fatalf("a plan after the abandoned commit: %v", err)
	}
	p.EndPlan(writers.TxnKey{}, nil)
}

// TestPinsCommitNotStarved: once a Commit waits, new plans wait for it,
// so back-to-back plans cannot starve it; the plan then proceeds, and a
// plan's context ends its wait.
func TestPinsCommitNotStarved(t *testing.T) {
	ctx := context.Background()
	p := newPins[uint64]()
	if err := p.BeginPlan(ctx); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	committed := make(chan error, 1)
	go func() {
		committed <- p.Commit(ctx, func(map[uint64]bool) error { <-release; return nil })
	}()
	deadline := time.Now().Add(10 * time.Second)
	for { // until the Commit waits
		p.mu.Lock()
		waiting := p.committing
		p.mu.Unlock()
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Commit did not start waiting")
		}
		time.Sleep(time.Millisecond)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := p.BeginPlan(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a new plan while a commit waits: %v; want it to wait (and give up with its context)", err)
	}
	next := make(chan error, 1)
	go func() { next <- p.BeginPlan(ctx) }()
	p.EndPlan(writers.TxnKey{}, nil) // the old plan ends: the commit runs
	select {
	case err := <-next:
		t.Fatalf("a plan began while the commit ran: %v", err)
	case <-time.After(50 * time.Millisecond): // a negative check
	}
	close(release)
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if err := <-next; err != nil {
		t.Fatal(err)
	}
	p.EndPlan(writers.TxnKey{}, nil)
}

// TestAcquirePins: writers of one table share its pins, of another
// table or sink not; the last release forgets them.
func TestAcquirePins(t *testing.T) {
	a, releaseA := AcquirePins[uint64]("lance", "file:///t")
	b, releaseB := AcquirePins[uint64]("lance", "file:///t")
	c, releaseC := AcquirePins[uint64]("lance", "file:///u")
	d, releaseD := AcquirePins[string]("delta", "file:///t")
	defer releaseC()
	defer releaseD()
	if a != b || a == c {
		t.Fatal("pins not shared by table")
	}
	_ = d
	a.Pin(writers.TxnKey{Writer: "w"}, []uint64{1})
	releaseA()
	releaseA() // idempotent
	if !b.Pinned()[1] {
		t.Fatal("pins lost while a writer still holds them")
	}
	releaseB()
	e, releaseE := AcquirePins[uint64]("lance", "file:///t")
	defer releaseE()
	if e == a || len(e.Pinned()) != 0 {
		t.Fatal("pins kept after every writer released them")
	}
}

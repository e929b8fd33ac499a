package membudget

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quiver-ingest/quiver/writers"
)

func newBudget(t *testing.T, limit int64) *Budget {
	t.Helper()
	b, err := New(Options{Limit: limit, MaxOpenFiles: 2, AdmissionTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// acquireAsync starts an Acquire and returns the channel of its result.
func acquireAsync(ctx context.Context, s *Share, n int64) chan error {
	done := make(chan error, 1)
	go func() { done <- s.Acquire(ctx, Decoded, n) }()
	return done
}

func waitBlocked(t *testing.T, b *Budget, waiters int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		n := b.waiters.Len()
		b.mu.Unlock()
		if n == waiters {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters, want %d", n, waiters)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestAcquireWaitsForRelease(t *testing.T) {
	b := newBudget(t, 100)
	s := b.Share("a", 0)
	if err := s.Acquire(t.Context(), Received, 80); err != nil {
		t.Fatal(err)
	}
	done := acquireAsync(t.Context(), s, 30)
	waitBlocked(t, b, 1)
	if s.Pressure() {
		t.Error("pressure on encoders while only streams hold memory")
	}
	s.Trade(Received, 80, Decoded, 10) // the waiter fits now: 10+30
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := b.Used(Decoded); got != 40 {
		t.Errorf("decoded = %d, want 40", got)
	}
	if got := b.Used(Received); got != 0 {
		t.Errorf("received = %d, want 0", got)
	}
}

func TestSharesCapEndpointsWithoutBlockingOthers(t *testing.T) {
	b := newBudget(t, 100)
	a, c := b.Share("a", 40), b.Share("c", 40)
	if err := a.Acquire(t.Context(), Decoded, 40); err != nil {
		t.Fatal(err)
	}
	blocked := acquireAsync(t.Context(), a, 10) // over a's share
	waitBlocked(t, b, 1)
	if err := c.Acquire(t.Context(), Decoded, 40); err != nil { // c is not stopped by a
		t.Fatal(err)
	}
	a.Release(Decoded, 40)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
}

func TestHoldOverLimitMakesStreamsWait(t *testing.T) {
	b := newBudget(t, 100)
	s := b.Share("a", 0)
	s.Charge(Decoded, 10)              // a stream's batch in a Write
	s.Hold(writers.MemoryEncoder, 150) // sinks never wait
	if !s.Pressure() {
		t.Error("no pressure over the limit")
	}
	done := acquireAsync(t.Context(), s, 10)
	waitBlocked(t, b, 1)
	s.Hold(writers.MemoryEncoder, -150)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s.Pressure() {
		t.Error("pressure with 20 of 100 bytes used")
	}
}

// What sinks hold drains only as streams move on: with nothing held by
// streams, a stream goes through, over the limit. Streams' reservations
// do not make encoders flush early; what sinks hold does, from half the
// budget on.
func TestSinkMemoryAloneDoesNotStopStreams(t *testing.T) {
	b := newBudget(t, 100)
	s := b.Share("a", 0)
	s.Hold(writers.MemoryEncoder, 5)
	if err := s.Acquire(t.Context(), Received, 100); err != nil {
		t.Fatal(err)
	}
	if s.Pressure() {
		t.Error("pressure from a stream's reservation")
	}
	s.Hold(writers.MemoryEncoder, 45)
	if !s.Pressure() {
		t.Error("no pressure with sinks holding half the budget")
	}
}

// Batches queued in a sink drain on their own: a stream waits for them
// even when no stream holds anything (else every stream would queue one
// more batch over the limit), and goes through once they are encoded.
func TestQueuedBatchesMakeStreamsWait(t *testing.T) {
	b := newBudget(t, 100)
	s, other := b.Share("a", 0), b.Share("c", 0)
	s.Hold(writers.MemoryQueued, 60)
	same := acquireAsync(t.Context(), s, 60) // over its share
	waitBlocked(t, b, 1)
	another := acquireAsync(t.Context(), other, 60) // over the budget
	waitBlocked(t, b, 2)
	if got := b.Used(Queued); got != 60 {
		t.Errorf("queued = %d, want 60", got)
	}
	s.Hold(writers.MemoryQueued, -60)
	for _, w := range []struct {
		s    *Share
		done chan error
	}{{s, same}, {other, another}} {
		if err := <-w.done; err != nil {
			t.Fatal(err)
		}
		w.s.Release(Decoded, 60) // its batch written: the next goes through
	}
}

func TestAdmitTimesOutWithExhausted(t *testing.T) {
	b := newBudget(t, 100)
	s := b.Share("a", 0)
	s.Charge(Decoded, 100)
	err := s.Admit(t.Context(), Received, 10)
	if !errors.Is(err, writers.ErrExhausted) || !errors.Is(err, ErrFull) {
		t.Fatalf("Admit = %v, want ErrExhausted", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiters.Len() != 0 || s.waiting != 0 || b.used != 100 {
		t.Errorf("after a timed-out Admit: %d waiters, %d waiting, %d used", b.waiters.Len(), s.waiting, b.used)
	}
}

func TestCancelledWaiterLetsLaterOnesThrough(t *testing.T) {
	b := newBudget(t, 100)
	s := b.Share("a", 0)
	s.Charge(Decoded, 50)
	ctx, cancel := context.WithCancel(t.Context())
	big := acquireAsync(ctx, s, 80) // first in line, does not fit
	waitBlocked(t, b, 1)
	small := acquireAsync(t.Context(), s, 10) // fits, but queued behind big
	waitBlocked(t, b, 2)
	cancel()
	if err := <-big; !errors.Is(err, context.Canceled) {
		t.Fatalf("big = %v", err)
	}
	if err := <-small; err != nil {
		t.Fatal(err)
	}
}

func TestOpenFilesBounded(t *testing.T) {
	b := newBudget(t, 100)
	s := b.Share("a", 0)
	r1, err := s.OpenFile(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r2, ok := s.TryOpenFile()
	if !ok {
		t.Fatal("second slot not free")
	}
	if _, ok := s.TryOpenFile(); ok {
		t.Fatal("third slot of two")
	}
	if _, err := s.OpenFile(t.Context()); !errors.Is(err, writers.ErrExhausted) {
		t.Fatalf("OpenFile on a full bound = %v, want ErrExhausted", err)
	}
	r1()
	r1() // idempotent
	if open, _ := b.OpenFiles(); open != 1 {
		t.Errorf("open = %d, want 1", open)
	}
	r3, err := s.OpenFile(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r2()
	r3()
}

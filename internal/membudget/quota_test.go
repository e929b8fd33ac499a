package membudget

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quiver-ingest/quiver/writers"
)

// With ClientFiles, TryOpenFile leaves the last 2×ClientFiles slots, and
// OpenFile gives them only to clients under their quota: a client at its
// quota waits for its own slots, then fails naming the key, while
// another client still gets slots.
func TestClientFilesLeaveSlotsToOthers(t *testing.T) {
	b, err := New(Options{Limit: 1 << 20, MaxOpenFiles: 8, ClientFiles: 2, AdmissionTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := b.Share("e", 0)
	for i := range 4 {
		if _, ok := s.TryOpenFile(); !ok {
			t.Fatalf("TryOpenFile %d of the 4 outside the reserve failed", i)
		}
	}
	if _, ok := s.TryOpenFile(); ok {
		t.Fatal("TryOpenFile took a slot of the last 2×ClientFiles")
	}
	greedy := WithQuota(context.Background(), b.Quota("token greedy", 0))
	var held []func()
	for range 2 {
		release, err := s.OpenFile(greedy)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, release)
	}
	if _, err := s.OpenFile(greedy); !errors.Is(err, writers.ErrExhausted) || !strings.Contains(err.Error(), "limits.client_open_files") {
		t.Fatalf("a third slot for the greedy client: %v, want ErrExhausted naming limits.client_open_files", err)
	}
	other := WithQuota(context.Background(), b.Quota("token other", 0))
	if _, err := s.OpenFile(other); err != nil {
		t.Fatalf("another client's slot: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		release, err := s.OpenFile(greedy)
		if err == nil {
			release()
		}
		done <- err
	}()
	held[0]()
	held[0]() // idempotent
	if err := <-done; err != nil {
		t.Fatalf("the greedy client's wait once one of its slots is back: %v", err)
	}
}

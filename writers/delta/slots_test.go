package delta

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/membudget"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

// One auto-commit key, four batches, max_open_files 1: before each encoder kept a slot, the key's second
// encoder waits for the slot its own first encoder holds until the end of
// the stream.
func TestOwnEncodersNeverWaitForEachOthersFileSlots(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(maxEncoders)) // a pool of several encoders
	b, err := membudget.New(membudget.Options{Limit: 64 << 20, MaxOpenFiles: 1, AdmissionTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	share := b.Share("test", 0)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cfg := testConfig(memURI(t))
	w, err := New(cfg, writers.Env{Endpoint: "test", ConfigDir: t.TempDir(), Allocator: mem, Memory: share})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	ctx := context.Background()
	key := writers.AutoKey("k")
	for i := range 4 {
		rec := idRecord(mem, writertest.Schema(), i*10, 10)
		err = w.Write(ctx, key, rec)
		rec.Release()
		if err != nil {
			break
		}
	}
	if err == nil {
		_, err = w.Precommit(ctx, key)
	}
	if rerr := w.Rollback(ctx, key); rerr != nil {
		t.Fatal(rerr)
	}
	for k := membudget.Kind(0); k < 4; k++ {
		if n := b.Used(k); n != 0 {
			t.Errorf("%s: %d bytes still charged", k, n)
		}
	}
	if err != nil {
		t.Fatalf("a single stream failed on its own file slots: %v", err)
	}
}

// TestConcurrentKeysShareTheCores: the first key encoding takes an
// encoder per core; a key started while it encodes takes only what is
// left (at least one), so concurrent streams do not each open a file per
// core; a key started after both end takes every core again.
func TestConcurrentKeysShareTheCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	w, err := New(testConfig(memURI(t)), writers.Env{Endpoint: "test", ConfigDir: t.TempDir(), Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	encoders := func(key writers.TxnKey) int {
		rec := idRecord(mem, writertest.Schema(), 0, 10)
		defer rec.Release()
		if err := w.Write(ctx, key, rec); err != nil {
			t.Fatal(err)
		}
		s, err := w.stages.Get(key, false)
		if err != nil || s == nil || s.pool == nil {
			t.Fatalf("key %v has no encoders: %v", key, err)
		}
		return len(s.pool.workers)
	}
	a, b := writers.AutoKey("a"), writers.AutoKey("b")
	if n := encoders(a); n != 2 {
		t.Errorf("first key: %d encoders, want 2 (GOMAXPROCS)", n)
	}
	if n := encoders(b); n != 1 {
		t.Errorf("second key while the first encodes: %d encoders, want 1", n)
	}
	for _, k := range []writers.TxnKey{a, b} {
		if err := w.Rollback(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	c := writers.AutoKey("c")
	if n := encoders(c); n != 2 {
		t.Errorf("a key after the others ended: %d encoders, want 2", n)
	}
	if err := w.Rollback(ctx, c); err != nil {
		t.Fatal(err)
	}
}

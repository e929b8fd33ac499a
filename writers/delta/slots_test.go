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

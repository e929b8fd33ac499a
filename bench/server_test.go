package bench

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/bench/workload"
	quiver "github.com/quiver-ingest/quiver/clients/go"
)

// TestStartServesEndpoints starts a server with one discard endpoint, puts
// a batch of the standard workload to it and stops it.
func TestStartServesEndpoints(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	srv, err := Start(ctx, dir, filepath.Join(dir, "data"), "  - {name: devnull, sink: discard}\n")
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = Stop(context.Background(), srv)
		}
	})

	c, err := quiver.Dial(srv.FlightAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	batches, err := workload.Generate(mem, workload.DefaultSeed, 100, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer workload.ReleaseAll(batches)
	rr, err := array.NewRecordReader(workload.Schema(), batches)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if _, err := c.Put(ctx, "devnull", rr); err != nil {
		t.Fatalf("put to devnull: %v", err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	stopped = true
	if err := Stop(cancelled, srv); err != nil {
		t.Errorf("stop with a cancelled context: %v", err)
	}
}

func TestStartRejectsBadEndpoints(t *testing.T) {
	dir := t.TempDir()
	if srv, err := Start(t.Context(), dir, dir, "  - {name: x, sink: nosuchsink}\n"); err == nil {
		_ = Stop(context.Background(), srv)
		t.Fatal("Start accepted an unknown sink")
	}
}

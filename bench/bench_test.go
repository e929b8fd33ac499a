package bench

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/bench/workload"
	quiver "github.com/quiver-ingest/quiver/clients/go"
)

// BenchmarkPutDiscard measures one auto-commit Put of 8 standard batches
// (524,288 rows) to an in-process Quiver discard endpoint, and the same
// against the bare Flight server, in the same run.
// The in-process Quiver is the server assembly (interceptors included).
func BenchmarkPutDiscard(b *testing.B) {
	const batches = 8
	mem := memory.DefaultAllocator
	w, err := newWorkload(mem, workload.DefaultSeed, batches*workload.DefaultBatchRows, workload.DefaultBatchRows)
	if err != nil {
		b.Fatal(err)
	}
	defer w.release()

	quiverAddr, stopQuiver, err := startDiscard(context.Background(), "devnull")
	if err != nil {
		b.Fatal(err)
	}
	defer stopQuiver()
	baseAddr, stopBase, err := startBaseline(mem, quiver.DefaultMaxMessageBytes)
	if err != nil {
		b.Fatal(err)
	}
	defer stopBase()

	for _, t := range []struct{ name, addr string }{{targetQuiver, quiverAddr}, {targetBaseline, baseAddr}} {
		b.Run(t.name, func(b *testing.B) {
			c, err := quiver.Dial(t.addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ReportAllocs()
			b.SetBytes(w.bytes)
			for b.Loop() {
				r, err := array.NewRecordReader(w.schema, w.batches)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Put(b.Context(), "devnull", r); err != nil {
					b.Fatal(err)
				}
				r.Release()
			}
			b.ReportMetric(float64(w.rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

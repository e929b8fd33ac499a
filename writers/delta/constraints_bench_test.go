package delta

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/quiver-ingest/quiver/bench/workload"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// benchConstraints are CHECK constraints over the standard workload, one
// of each kind, which every row passes.
var benchConstraints = map[string]string{
	"id_positive":    "id >= 0 AND user_id IS NOT NULL",
	"amount_range":   "amount BETWEEN 0 AND 1000000.00",
	"category_known": "category IN ('books', 'games', 'music', 'video', 'garden', 'tools', 'toys', 'food', 'drinks', 'sports', 'outdoor', 'health', 'beauty', 'office', 'pets', 'travel')",
	"recent":         "ts >= TIMESTAMP '2020-01-01 00:00:00Z' OR NOT active",
}

// workloadBatches generates rows of the standard workload, released when
// b ends, and their total size.
func workloadBatches(b *testing.B, rows int64) ([]arrow.RecordBatch, int64) {
	batches, err := workload.Generate(memory.DefaultAllocator, workload.DefaultSeed, rows, workload.DefaultBatchRows)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, r := range batches {
			r.Release()
		}
	})
	var size int64
	for _, r := range batches {
		size += util.TotalRecordSize(r)
	}
	return batches, size
}

// BenchmarkConstraintsWrite measures the sink's appends of the standard
// workload (one auto-commit stream, zstd) into a table with
// benchConstraints and into a plain one, in the same run: the ratio of
// their rows/s is the cost of checking.
func BenchmarkConstraintsWrite(b *testing.B) {
	const rows int64 = 1 << 20
	batches, size := workloadBatches(b, rows)
	ctx := context.Background()
	for _, checked := range []bool{false, true} {
		b.Run(fmt.Sprintf("constraints=%v", checked), func(b *testing.B) {
			uri := "file://" + filepath.Join(b.TempDir(), "t")
			bucket, err := storage.Open(ctx, uri, storage.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer bucket.Close()
			snap, err := deltalog.Create(ctx, bucket, workload.Schema(), nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			want := 0
			if checked {
				if err := putConstraints(bucket, snap, benchConstraints, nil); err != nil {
					b.Fatal(err)
				}
				want = len(benchConstraints)
			}
			w, err := New(testConfig(uri), writers.Env{})
			if err != nil {
				b.Fatal(err)
			}
			if err := w.Open(ctx); err != nil {
				b.Fatal(err)
			}
			defer w.Close(ctx)
			if cons, err := deltalog.Constraints(&w.cached().Metadata); err != nil || len(cons) != want {
				b.Fatalf("constraints %v, %v", cons, err)
			}
			measure(b, size, rows, 1, func(id int) error {
				return writeStream(ctx, w, writers.AutoKey(fmt.Sprint(id)), batches)
			})
		})
	}
}

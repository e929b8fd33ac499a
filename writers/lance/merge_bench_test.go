package lance

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/quiver-ingest/quiver/writers"
)

// BenchmarkMergeWarmIndex merges sources of 20,000 rows (half existing ids
// spread over a 500,000-row dataset, half new; update_all + insert_all)
// through a writer whose key index is already built: the warm-index path
// of the merge-insert benchmark, without Flight.
func BenchmarkMergeWarmIndex(b *testing.B) {
	const baseRows, srcRows = 500_000, 20_000
	mem := memory.NewGoAllocator()
	dir := b.TempDir()
	cfg := NewConfig()
	cfg.DatasetURI = "file://" + dir
	cfg.WriteMode = ModeMergeInsert
	cfg.On = []string{"id"}
	w, err := New(cfg, writers.Env{Endpoint: "items", Allocator: mem})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Open(ctx); err != nil {
		b.Fatal(err)
	}
	defer w.Close(ctx)
	source := func(round int) []diffRow {
		rows := make([]diffRow, 0, srcRows)
		for i := range srcRows / 2 {
			id := int64((i*(baseRows/(srcRows/2)) + round*7) % baseRows)
			rows = append(rows, diffRow{id: id, k2: "a", val: float64(round), name: fmt.Sprintf("u%d", round)})
		}
		for i := range srcRows / 2 {
			rows = append(rows, diffRow{id: int64(baseRows + round*srcRows + i), k2: "a", name: "n"})
		}
		return rows
	}
	var base []diffRow
	for i := range baseRows {
		base = append(base, diffRow{id: int64(i), k2: "a", val: float64(i), name: fmt.Sprintf("r%d", i)})
	}
	epoch := int64(1)
	merge := func(rows []diffRow) {
		rec := diffRecord(mem, rows)
		defer rec.Release()
		if _, err := mergeRows(w, epoch, rec); err != nil {
			b.Fatal(err)
		}
		epoch++
	}
	merge(base)      // the dataset
	merge(source(0)) // builds the index
	probe := diffRecord(mem, source(0))
	b.SetBytes(util.TotalRecordSize(probe))
	probe.Release()
	b.ReportAllocs()
	round := 1
	for b.Loop() {
		b.StopTimer()
		rows := source(round)
		round++
		b.StartTimer()
		merge(rows)
	}
	b.ReportMetric(float64(srcRows*(round-1))/b.Elapsed().Seconds(), "rows/s")
}

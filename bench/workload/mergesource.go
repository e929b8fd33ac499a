package workload

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// MergeSource builds source round (0, 1, ...) of the merge-insert
// benchmark against a table of the standard workload with ids
// [0, baseRows): srcRows rows of the workload (seed DefaultSeed+round+1,
// so new amount, score and name values) whose first half update existing
// ids, spread evenly over the table and shifted by round so every round
// updates ids of its own, and whose second half insert ids past
// baseRows that no other round uses. The batches (of DefaultBatchRows)
// are owned by the caller, who releases each.
func MergeSource(mem memory.Allocator, baseRows, srcRows int64, round int) ([]arrow.RecordBatch, error) {
	if baseRows <= 0 || srcRows < 2 || round < 0 {
		return nil, fmt.Errorf("workload: merge source %d of %d rows into %d: need a table, at least 2 source rows and round >= 0", round, srcRows, baseRows)
	}
	recs, err := Generate(mem, DefaultSeed+uint64(round)+1, srcRows, DefaultBatchRows)
	if err != nil {
		return nil, err
	}
	defer ReleaseAll(recs)
	half := srcRows / 2
	stride := max(baseRows/half, 1)
	r := int64(round)
	return WithIDs(mem, recs, func(row int64) int64 {
		if row < half {
			return (row*stride + r) % baseRows
		}
		return baseRows + r*srcRows + row
	}), nil
}

// WithIDs returns copies of recs (batches of the standard workload,
// borrowed) sharing every column but the first, whose id column holds
// id(row) for each row's position in the whole of recs. The copies are
// owned by the caller.
func WithIDs(mem memory.Allocator, recs []arrow.RecordBatch, id func(row int64) int64) []arrow.RecordBatch {
	out := make([]arrow.RecordBatch, len(recs))
	var row int64
	for i, r := range recs {
		ib := array.NewInt64Builder(mem)
		ib.Reserve(int(r.NumRows()))
		for range r.NumRows() {
			ib.UnsafeAppend(id(row))
			row++
		}
		ids := ib.NewInt64Array()
		ib.Release()
		cols := append([]arrow.Array{ids}, r.Columns()[1:]...)
		out[i] = array.NewRecordBatch(r.Schema(), cols, r.NumRows())
		ids.Release()
	}
	return out
}

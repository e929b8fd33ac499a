package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// DefaultSeed is the standard workload's seed.
const DefaultSeed uint64 = 20261202

// DefaultBatchRows is the standard batch size.
const DefaultBatchRows = 65536

// Workload value ranges.
const (
	maxUserID  = 1_000_000 // user_id is uniform in [0, maxUserID]
	minNameLen = 8
	maxNameLen = 24 // name length is uniform in [minNameLen, maxNameLen]
	maxAmount  = 1000.0
)

// tsBase is the ts of id 0; ts grows by one millisecond per id.
var tsBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// categories are the 16 values of the category column.
var categories = [16]string{
	"books", "games", "music", "video", "garden", "tools", "toys", "food",
	"drinks", "sports", "outdoor", "health", "beauty", "office", "pets", "travel",
}

const nameAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// Schema returns the standard workload's schema. No column has nulls.
func Schema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us}, // timestamp[us, tz=UTC]
		{Name: "user_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "category", Type: arrow.BinaryTypes.String},
		{Name: "active", Type: arrow.FixedWidthTypes.Boolean},
	}, nil)
}

// Generate builds rows rows of the standard workload, ids 0..rows-1, in
// batches of batchRows (the last one may be shorter). The same seed gives
// the same data. The batches are owned by the caller, who releases each.
// One record builder is reused for every batch and each column is filled
// in its own loop.
func Generate(mem memory.Allocator, seed uint64, rows int64, batchRows int) ([]arrow.RecordBatch, error) {
	if rows < 0 || batchRows <= 0 {
		return nil, fmt.Errorf("workload: generate %d rows in batches of %d: need rows >= 0 and batch rows > 0", rows, batchRows)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := array.NewRecordBuilder(mem, Schema())
	defer b.Release()
	var out []arrow.RecordBatch
	for first := int64(0); first < rows; first += int64(batchRows) {
		n := int(min(int64(batchRows), rows-first))
		fillBatch(b, rng, first, n)
		out = append(out, b.NewRecordBatch())
	}
	return out, nil
}

// fillBatch appends n rows starting at id first to b's columns.
func fillBatch(b *array.RecordBuilder, rng *rand.Rand, first int64, n int) {
	ids := b.Field(0).(*array.Int64Builder)
	ts := b.Field(1).(*array.TimestampBuilder)
	users := b.Field(2).(*array.Int64Builder)
	amounts := b.Field(3).(*array.Float64Builder)
	scores := b.Field(4).(*array.Float64Builder)
	names := b.Field(5).(*array.StringBuilder)
	cats := b.Field(6).(*array.StringBuilder)
	active := b.Field(7).(*array.BooleanBuilder)
	for _, fb := range b.Fields() {
		fb.Reserve(n)
	}

	base := tsBase.UnixMicro() + first*1000
	for i := range int64(n) {
		ids.UnsafeAppend(first + i)
		ts.UnsafeAppend(arrow.Timestamp(base + i*1000))
	}
	for range n {
		users.UnsafeAppend(rng.Int64N(maxUserID + 1))
	}
	for range n {
		// Whole cents, like a price.
		amounts.UnsafeAppend(math.Round(rng.Float64()*maxAmount*100) / 100)
	}
	for range n {
		scores.UnsafeAppend(rng.Float64())
	}
	names.ReserveData(n * (minNameLen + maxNameLen) / 2)
	var name [maxNameLen]byte
	for range n {
		l := minNameLen + rng.IntN(maxNameLen-minNameLen+1)
		for j := range l {
			name[j] = nameAlphabet[rng.IntN(len(nameAlphabet))]
		}
		names.BinaryBuilder.Append(name[:l])
	}
	for range n {
		cats.Append(categories[rng.IntN(len(categories))])
	}
	for range n {
		active.UnsafeAppend(rng.IntN(2) == 1)
	}
}

package delta

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
)

// tsBatch is a changelog keyed by a timestamp of the given unit: ts is in
// seconds and converted to unit.
func tsBatch(mem memory.Allocator, unit arrow.TimeUnit, secs []int64, str string) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: unit, TimeZone: "UTC"}, Nullable: true},
		{Name: "str", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: merge.OpColumn, Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil))
	defer b.Release()
	mult := map[arrow.TimeUnit]int64{arrow.Second: 1, arrow.Millisecond: 1e3, arrow.Microsecond: 1e6, arrow.Nanosecond: 1e9}[unit]
	for _, s := range secs {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(s * mult))
		b.Field(1).(*array.StringBuilder).Append(str)
		b.Field(2).(*array.StringBuilder).Append("U")
	}
	return b.NewRecordBatch()
}

// TestUpsertTimestampKeyUnits: a timestamp merge key sent in milliseconds
// to a table whose files hold microseconds (CheckSchema accepts any
// timestamp unit) updates the rows of the same instants instead of
// inserting duplicates (StoredKeys).
func TestUpsertTimestampKeyUnits(t *testing.T) {
	for _, dvs := range []bool{false, true} {
		t.Run(map[bool]string{false: "copy-on-write", true: "dv"}[dvs], func(t *testing.T) {
			mem := checkedMem(t)
			cfg := testConfig(memURI(t), func(c *Config) {
				c.WriteMode, c.MergeKeys, c.DeletionVectors = ModeUpsert, []string{"ts"}, dvs
			})
			w := openWriter(t, cfg, mem)
			secs := []int64{1_700_000_000, 1_700_000_001, 1_700_000_002}
			seed := tsBatch(mem, arrow.Microsecond, secs, "seed")
			commitOne(t, w, writers.TxnKey{Writer: "ts", Epoch: 1}, seed)
			seed.Release()
			up := tsBatch(mem, arrow.Millisecond, secs[:1], "updated")
			commitOne(t, w, writers.TxnKey{Writer: "ts", Epoch: 2}, up)
			up.Release()
			if got := publishedRows(t, cfg); got != 3 {
				t.Fatalf("%d rows after updating one of 3 keys (sent in ms to a µs table), want 3: rows: %v", got, tableRows(t, cfg, []string{"ts", "str"}))
			}
		})
	}
}

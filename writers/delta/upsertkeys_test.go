package delta

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/quiver-ingest/quiver/writers"
)

// Upserting into a Spark table whose timestamp partition values are in the
// legacy "yyyy-MM-dd HH:mm:ss" form updates the row of that key instead of
// inserting a second one.
func TestUpsertMatchesLegacyTimestampPartitions(t *testing.T) {
	mem := checkedMem(t)
	cfg := testConfig(goldenCopy(t, "partition-timestamp-legacy"), func(c *Config) {
		c.WriteMode, c.MergeKeys, c.PartitionBy = ModeUpsert, []string{"s", "ts"}, []string{"ts"}
	})
	cols := []string{"s", "ts"}
	if n := len(tableRows(t, cfg, cols)); n != 2 {
		t.Fatalf("golden table read back %d rows, want 2", n)
	}
	w := openWriter(t, cfg, mem)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append("a")
	b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC).UnixMicro()))
	rec := b.NewRecordBatch()
	defer rec.Release()
	commitOne(t, w, writers.TxnKey{Writer: "golden", Epoch: 1}, rec)
	if rows := tableRows(t, cfg, cols); len(rows) != 2 {
		t.Fatalf("after upserting an existing key: %d rows %v, want 2", len(rows), rows)
	}
}

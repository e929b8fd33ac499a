package delta

import (
	"math"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// A file's partition values spelled by another writer (Spark's timestamps,
// older Quiver's Go floats) read as the source's spelling: compared as
// spelled, an upsert missed the key and inserted it a second time.
func TestCanonicalPartition(t *testing.T) {
	ts := deltalog.DataType{Name: "timestamp"}
	want, err := deltalayout.FormatPartitionValue(time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	inf, _ := deltalayout.FormatPartitionValue(math.Inf(1))
	tenth, _ := deltalayout.FormatPartitionValue(float32(0.1))
	tests := []struct {
		v    string
		typ  deltalog.DataType
		want string
	}{
		{"2024-01-01 10:00:00", ts, *want},
		{"2024-01-01T10:00:00.000000Z", ts, *want},
		{"+Inf", deltalog.DataType{Name: "double"}, *inf},
		{"Infinity", deltalog.DataType{Name: "double"}, *inf},
		{"0.1", deltalog.DataType{Name: "float"}, *tenth},
		{"007", deltalog.DataType{Name: "integer"}, "7"},
		{"not a number", deltalog.DataType{Name: "integer"}, "not a number"},
		{"a b", deltalog.DataType{Name: "string"}, "a b"},
	}
	for _, tt := range tests {
		got := canonicalPartition(&tt.v, tt.typ)
		if got == nil || *got != tt.want {
			t.Errorf("canonicalPartition(%q, %s) = %v, want %q", tt.v, tt.typ.Name, got, tt.want)
		}
	}
	if got := canonicalPartition(new(string), ts); got != nil {
		t.Errorf(`"" reads as %q, want null`, *got)
	}
}

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

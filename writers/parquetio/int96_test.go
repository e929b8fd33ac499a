package parquetio

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// goldenINT96 is a Delta table written by Spark with legacy INT96
// timestamps (testdata/delta-golden/README.md, types-timestamp-int96).
const goldenINT96 = "../../testdata/delta-golden/types-timestamp-int96"

// TestReadSparkINT96 reads Spark's INT96 timestamps as timestamp[us, UTC]
// with the values the table's generator wrote (INT96_ROWS of
// testdata/delta-golden/generate.py).
func TestReadSparkINT96(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	files, err := filepath.Glob(filepath.Join(goldenINT96, "*", "*.parquet"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden INT96 files under %s (%v)", goldenINT96, err)
	}
	want := map[int64]any{
		0: time.Date(2020, 2, 1, 8, 9, 10, 0, time.UTC).UnixMicro(),
		1: time.Date(1999, 1, 1, 9, 0, 0, 0, time.UTC).UnixMicro(),
		2: time.Date(2000, 1, 1, 9, 0, 0, 0, time.UTC).UnixMicro(),
		3: time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(),
		4: nil,
	}
	got := map[int64]any{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		schema, recs := readAll(t, data, mem, ReadOptions{Columns: []string{"id", "time"}})
		wantType := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
		if tt := schema.Field(1).Type; !arrow.TypeEqual(tt, wantType) {
			t.Fatalf("%s: time read as %s, want %s", filepath.Base(f), tt, wantType)
		}
		for _, row := range rowsOf(recs) {
			got[row[0].(int64)] = row[1]
		}
		releaseAll(recs)
	}
	if len(got) != len(want) {
		t.Fatalf("read ids %v, want %v", got, want)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("id %d: time %v µs, want %v", id, got[id], w)
		}
	}
}

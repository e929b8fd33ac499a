package parquetio

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/bench/workload"
	"github.com/quiver-ingest/quiver/internal/duckcheck"
)

// TestDuckDBReadsWorkload has DuckDB, an independent reader, read the
// standard workload written with each codec: row count, row groups,
// codec, and per column nulls, min and max equal to FileStats, and the
// sum of amount equal to the Arrow data's.
func TestDuckDBReadsWorkload(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	recs, err := workload.Generate(mem, workload.DefaultSeed, 100_000, 30_000)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseAll(recs)
	var amountSum float64
	for _, rec := range recs {
		for _, v := range rec.Column(3).(*array.Float64).Float64Values() {
			amountSum += v
		}
	}
	db := duckcheck.Open(t)
	for _, codec := range []string{CompressionSnappy, CompressionZstd, CompressionNone} {
		t.Run(codec, func(t *testing.T) {
			data, fs := writeFile(t, workload.Schema(), Options{Compression: codec, RowGroupRows: 40_000}, recs...)
			path := filepath.Join(t.TempDir(), "workload.parquet")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			sum := db.FileSummary(t, path)
			wantCodec := map[string]string{CompressionSnappy: "SNAPPY", CompressionZstd: "ZSTD", CompressionNone: "UNCOMPRESSED"}[codec]
			if sum.Rows != 100_000 || sum.RowGroups != 3 || !reflect.DeepEqual(sum.Compression, []string{wantCodec}) {
				t.Fatalf("DuckDB: %d rows, %d row groups, codecs %v; want 100000, 3, [%s]", sum.Rows, sum.RowGroups, sum.Compression, wantCodec)
			}
			for _, cs := range fs.Columns {
				col := sum.Column(t, cs.Path[0])
				if col.Nulls != cs.NullCount {
					t.Errorf("%s: DuckDB counts %d nulls, stats %d", col.Name, col.Nulls, cs.NullCount)
				}
				if !sameBound(col.Min, cs.Min) || !sameBound(col.Max, cs.Max) {
					t.Errorf("%s: DuckDB bounds %v..%v, stats %v..%v", col.Name, col.Min, col.Max, cs.Min, cs.Max)
				}
			}
			if got := sum.Column(t, "amount").Sum.(float64); !closeTo(got, amountSum) {
				t.Errorf("DuckDB sum(amount) = %v, Arrow data %v", got, amountSum)
			}
		})
	}
}

// TestDuckDBReadsAllTypes has DuckDB read a file of every supported type
// with nulls and nested columns: the row count and every top-level
// column's null count must match.
func TestDuckDBReadsAllTypes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := allTypesSchema()
	full := randomBatch(t, mem, rand.New(rand.NewPCG(3, 4)), schema, 600, 0.25)
	defer full.Release()
	rec := sliceColumns(full, 50, 500)
	defer rec.Release()
	data, fs := writeFile(t, schema, Options{RowGroupRows: 128}, rec)
	path := filepath.Join(t.TempDir(), "all.parquet")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := duckcheck.Open(t).FileSummary(t, path)
	if sum.Rows != 500 || sum.RowGroups != 4 {
		t.Fatalf("DuckDB: %d rows in %d row groups, want 500 in 4", sum.Rows, sum.RowGroups)
	}
	for _, cs := range fs.Columns {
		if len(cs.Path) > 1 {
			continue // DuckDB's summary covers top-level columns
		}
		col := sum.Column(t, cs.Path[0])
		if col.Nulls != cs.NullCount {
			t.Errorf("%s (%s): DuckDB counts %d nulls, stats %d", col.Name, col.Type, col.Nulls, cs.NullCount)
		}
		if strings.HasPrefix(col.Type, "TIMESTAMP") && cs.HasMinMax && !sameBound(col.Min, cs.Min) {
			t.Errorf("%s (%s): DuckDB min %v, stats %v", col.Name, col.Type, col.Min, cs.Min)
		}
	}
	for _, name := range []string{"i8", "i16", "i32", "i64", "str", "dict_str", "dict_i64"} {
		col, cs := sum.Column(t, name), statsOf(fs, name)
		if !sameBound(col.Min, cs.Min) || !sameBound(col.Max, cs.Max) {
			t.Errorf("%s: DuckDB bounds %v..%v, stats %v..%v", name, col.Min, col.Max, cs.Min, cs.Max)
		}
	}
}

func statsOf(fs FileStats, name string) ColumnStats {
	for _, c := range fs.Columns {
		if len(c.Path) == 1 && c.Path[0] == name {
			return c
		}
	}
	return ColumnStats{}
}

// sameBound compares a DuckDB value with a ColumnStats bound: integers of
// any width, instants at microsecond precision, others as they are.
func sameBound(duck, stat any) bool {
	switch s := stat.(type) {
	case int64:
		v := reflect.ValueOf(duck)
		return v.CanInt() && v.Int() == s
	case time.Time:
		d, ok := duck.(time.Time)
		return ok && d.UnixMicro() == s.UnixMicro()
	}
	return reflect.DeepEqual(duck, stat)
}

func closeTo(a, b float64) bool {
	d := a - b
	return d < 1e-6*max(1, b) && d > -1e-6*max(1, b)
}

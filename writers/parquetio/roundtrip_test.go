package parquetio

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRoundTripProperty writes random batches of every supported type
// (nulls, sliced columns, dictionaries, nested) and reads them back.
func TestRoundTripProperty(t *testing.T) {
	schema := allTypesSchema()
	for seed := range uint64(6) {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rng := rand.New(rand.NewPCG(seed, 99))
			opts := Options{
				Compression:  []string{"snappy", "zstd", "none"}[seed%3],
				RowGroupRows: int64(1 + rng.IntN(300)),
				NoDictionary: seed%4 == 3,
			}
			nullRate := []float64{0, 0.2, 0.9}[seed%3]
			var batches []arrow.RecordBatch
			for range 1 + rng.IntN(4) {
				n := rng.IntN(400)
				full := randomBatch(t, mem, rng, schema, n+20, nullRate)
				off := int64(rng.IntN(20))
				batches = append(batches, sliceColumns(full, off, int64(n)))
				full.Release()
			}
			defer releaseAll(batches)

			data, fs := writeFile(t, schema, opts, batches...)
			gotSchema, got := readAll(t, data, mem, ReadOptions{BatchRows: 97})
			defer releaseAll(got)

			for i, f := range schema.Fields() {
				g := gotSchema.Field(i)
				if g.Name != f.Name || g.Nullable != f.Nullable || !sameShape(g.Type, readType(f.Type)) {
					t.Errorf("column %d read as %s, want %s %s nullable=%v", i, g, f.Name, readType(f.Type), f.Nullable)
				}
			}
			want := rowsOf(batches)
			if fs.Rows != int64(len(want)) {
				t.Errorf("FileStats.Rows = %d, wrote %d", fs.Rows, len(want))
			}
			assertSameRows(t, schema, want, rowsOf(got))
		})
	}
}

func TestEmptyFile(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := allTypesSchema()
	data, fs := writeFile(t, schema, Options{})
	if fs.Rows != 0 || len(fs.Columns) == 0 {
		t.Fatalf("stats of an empty file: %+v", fs)
	}
	gotSchema, got := readAll(t, data, mem, ReadOptions{})
	defer releaseAll(got)
	if gotSchema.NumFields() != schema.NumFields() || len(rowsOf(got)) != 0 {
		t.Fatalf("empty file read as %d fields, %d rows", gotSchema.NumFields(), len(rowsOf(got)))
	}
}

func TestReadSelectedColumns(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := allTypesSchema()
	rec := randomBatch(t, mem, rand.New(rand.NewPCG(1, 2)), schema, 50, 0.1)
	defer rec.Release()
	data, _ := writeFile(t, schema, Options{})

	t.Run("known", func(t *testing.T) {
		data, _ := writeFile(t, schema, Options{}, rec)
		gotSchema, got := readAll(t, data, mem, ReadOptions{Columns: []string{"tags", "str"}})
		defer releaseAll(got)
		// File order, not request order.
		if gotSchema.NumFields() != 2 || gotSchema.Field(0).Name != "str" || gotSchema.Field(1).Name != "tags" {
			t.Fatalf("selected columns read as %s", fieldNames(gotSchema))
		}
		rows := rowsOf(got)
		if len(rows) != 50 {
			t.Fatalf("read %d rows, want 50", len(rows))
		}
		strCol := schema.FieldIndices("str")[0]
		for i, row := range rows {
			if w := goValue(rec.Column(strCol), i); w != row[0] {
				t.Fatalf("row %d str = %v, want %v", i, row[0], w)
			}
		}
	})
	t.Run("unknown", func(t *testing.T) {
		_, err := ReadFile(t.Context(), bytesReader(data), int64(len(data)), mem, ReadOptions{Columns: []string{"nope"}})
		assertInvalid(t, err, "nope")
	})
	t.Run("skip missing", func(t *testing.T) {
		gotSchema, got := readAll(t, data, mem, ReadOptions{Columns: []string{"nope", "str"}, SkipMissing: true})
		defer releaseAll(got)
		if gotSchema.NumFields() != 1 || gotSchema.Field(0).Name != "str" {
			t.Fatalf("selected columns read as %s", fieldNames(gotSchema))
		}
	})
	t.Run("every column missing", func(t *testing.T) {
		// The rows alone, in batches (pqarrow would read every column).
		data, _ := writeFile(t, schema, Options{}, rec)
		gotSchema, got := readAll(t, data, mem, ReadOptions{Columns: []string{"nope"}, SkipMissing: true, BatchRows: 16})
		defer releaseAll(got)
		var rows int64
		for _, b := range got {
			rows += b.NumRows()
		}
		if gotSchema.NumFields() != 0 || len(got) != 4 || rows != 50 {
			t.Fatalf("read %s in %d batches of %d rows in all, want no column, 4 batches, 50 rows", fieldNames(gotSchema), len(got), rows)
		}
	})
	t.Run("not parquet", func(t *testing.T) {
		junk := []byte("definitely not a parquet file")
		_, err := ReadFile(t.Context(), bytesReader(junk), int64(len(junk)), mem, ReadOptions{})
		assertInvalid(t, err, "parquet")
	})
}

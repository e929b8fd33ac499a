package workload

import (
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func generateT(t *testing.T, seed uint64, rows int64, batchRows int) []arrow.RecordBatch {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	batches, err := Generate(mem, seed, rows, batchRows)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ReleaseAll(batches)
		mem.AssertSize(t, 0)
	})
	return batches
}

func TestSchema(t *testing.T) {
	const want = "schema:\n  fields: 8\n" +
		"    - id: type=int64\n" +
		"    - ts: type=timestamp[us, tz=UTC]\n" +
		"    - user_id: type=int64\n" +
		"    - amount: type=float64\n" +
		"    - score: type=float64\n" +
		"    - name: type=utf8\n" +
		"    - category: type=utf8\n" +
		"    - active: type=bool"
	if got := Schema().String(); got != want {
		t.Errorf("schema:\n%s\nwant:\n%s", got, want)
	}
}

func TestGenerateDeterministic(t *testing.T) {
	a := generateT(t, 7, 5000, 1024)
	b := generateT(t, 7, 5000, 1024)
	c := generateT(t, 8, 5000, 1024)
	for i := range a {
		if !array.RecordEqual(a[i], b[i]) {
			t.Fatalf("batch %d differs between two runs with the same seed", i)
		}
	}
	if array.RecordEqual(a[0], c[0]) {
		t.Error("seeds 7 and 8 generated the same first batch")
	}
}

func TestGenerateShapeAndRanges(t *testing.T) {
	tests := []struct {
		name      string
		rows      int64
		batchRows int
		want      []int64
	}{
		{"exact batches", 2048, 1024, []int64{1024, 1024}},
		{"short last batch", 2500, 1024, []int64{1024, 1024, 452}},
		{"one small batch", 10, 65536, []int64{10}},
		{"nothing", 0, 1024, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			batches := generateT(t, DefaultSeed, tt.rows, tt.batchRows)
			var sizes []int64
			var id int64
			for _, b := range batches {
				sizes = append(sizes, b.NumRows())
				checkBatch(t, b, &id)
			}
			if !slices.Equal(sizes, tt.want) {
				t.Errorf("batch sizes = %v, want %v", sizes, tt.want)
			}
		})
	}
}

// checkBatch checks every value of b against the workload's definition;
// *next is the id the batch must start at, advanced past it.
func checkBatch(t *testing.T, b arrow.RecordBatch, next *int64) {
	t.Helper()
	ids := b.Column(0).(*array.Int64)
	ts := b.Column(1).(*array.Timestamp)
	users := b.Column(2).(*array.Int64)
	amounts := b.Column(3).(*array.Float64)
	scores := b.Column(4).(*array.Float64)
	names := b.Column(5).(*array.String)
	cats := b.Column(6).(*array.String)
	for _, col := range b.Columns() {
		if col.NullN() != 0 {
			t.Fatalf("column has %d nulls, want none", col.NullN())
		}
	}
	for i := range int(b.NumRows()) {
		id := ids.Value(i)
		if id != *next {
			t.Fatalf("id %d, want %d (sequential)", id, *next)
		}
		*next++
		if got, want := ts.Value(i).ToTime(arrow.Microsecond), tsBase.Add(time.Duration(id)*time.Millisecond); !got.Equal(want) {
			t.Fatalf("row %d: ts %v, want %v", id, got, want)
		}
		if u := users.Value(i); u < 0 || u > maxUserID {
			t.Fatalf("row %d: user_id %d out of [0, %d]", id, u, maxUserID)
		}
		if a := amounts.Value(i); a < 0 || a > maxAmount {
			t.Fatalf("row %d: amount %v out of [0, %v]", id, a, maxAmount)
		}
		if s := scores.Value(i); s < 0 || s >= 1 {
			t.Fatalf("row %d: score %v out of [0, 1)", id, s)
		}
		name := names.Value(i)
		if len(name) < minNameLen || len(name) > maxNameLen {
			t.Fatalf("row %d: name %q length out of [%d, %d]", id, name, minNameLen, maxNameLen)
		}
		for _, r := range name {
			if r > 127 {
				t.Fatalf("row %d: name %q is not ASCII", id, name)
			}
		}
		if !slices.Contains(categories[:], cats.Value(i)) {
			t.Fatalf("row %d: category %q is not one of the 16", id, cats.Value(i))
		}
	}
}

func TestGenerateRejectsBadSizes(t *testing.T) {
	if _, err := Generate(memory.DefaultAllocator, 1, 10, 0); err == nil {
		t.Error("batch rows 0: no error")
	}
	if _, err := Generate(memory.DefaultAllocator, 1, -1, 10); err == nil {
		t.Error("rows -1: no error")
	}
}

func TestIPCBodyBytes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	b := array.NewInt64Builder(mem)
	b.AppendValues([]int64{1, 2, 3}, nil)
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{col}, 3)
	col.Release()
	defer rec.Release()
	if n, err := IPCBodyBytes(mem, rec); err != nil || n != 24 {
		t.Errorf("IPCBodyBytes of 3 int64 = %d, %v; want 24 (no validity buffer, no padding)", n, err)
	}

	// The standard batch is about 4.5 MB.
	std := generateT(t, DefaultSeed, DefaultBatchRows, DefaultBatchRows)
	n, err := IPCBodyBytes(mem, std[0])
	if err != nil || n < 4_300_000 || n > 4_800_000 {
		t.Errorf("IPCBodyBytes of a standard batch = %d, %v; want about 4.5 MB", n, err)
	}
}

package parquetio

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/reftool"
)

// TestPyarrowReadsRandomFiles is the differential test against Arrow
// C++'s reader: random schemas (every type, wrapped at random in lists,
// structs and maps), random data (nulls, empty strings, NaN, ±0, ±Inf,
// sliced batches) and random options are written, then pyarrow reads each
// file with page checksums verified and must find exactly the values
// written (testdata/pyarrow_diff.py compares them).
func TestPyarrowReadsRandomFiles(t *testing.T) {
	python := reftool.Python(t, "pyarrow.parquet")
	floatSpecials = 0.05
	defer func() { floatSpecials = 0 }()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	args := []string{filepath.Join("testdata", "pyarrow_diff.py")}
	for seed := range uint64(24) {
		rng := rand.New(rand.NewPCG(seed, 36))
		schema := randomSchema(rng)
		opts := Options{
			Compression:   []string{CompressionSnappy, CompressionZstd, CompressionNone}[rng.IntN(3)],
			RowGroupRows:  int64(1 + rng.IntN(2000)),
			NoDictionary:  rng.IntN(4) == 0,
			DeltaIntegers: rng.IntN(2) == 0,
		}
		nullRate := []float64{0, 0.1, 0.5, 0.95}[rng.IntN(4)]
		var batches []arrow.RecordBatch
		for range 1 + rng.IntN(3) {
			n := rng.IntN(3000)
			full := randomBatch(t, mem, rng, schema, n+10, nullRate)
			batches = append(batches, sliceColumns(full, int64(rng.IntN(10)), int64(n)))
			full.Release()
		}
		data, _ := writeFile(t, schema, opts, batches...)
		file := filepath.Join(dir, fmt.Sprintf("seed%d.parquet", seed))
		expected := filepath.Join(dir, fmt.Sprintf("seed%d.jsonl", seed))
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		writeCanonical(t, expected, batches)
		releaseAll(batches)
		args = append(args, file, expected)
	}
	out, err := exec.Command(python, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("pyarrow: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// randomSchema picks 1 to 8 columns of allTypesSchema, wrapping some in a
// list, a struct or a map.
func randomSchema(rng *rand.Rand) *arrow.Schema {
	base := allTypesSchema().Fields()
	fields := make([]arrow.Field, 1+rng.IntN(8))
	for i := range fields {
		f := base[rng.IntN(len(base))]
		f.Name = fmt.Sprintf("c%d_%s", i, f.Name)
		if _, dict := f.Type.(*arrow.DictionaryType); !dict {
			switch rng.IntN(6) {
			case 0:
				f.Type = arrow.ListOfField(arrow.Field{Name: "item", Type: f.Type, Nullable: f.Nullable})
			case 1:
				f.Type = arrow.StructOf(arrow.Field{Name: "v", Type: f.Type, Nullable: f.Nullable}, arrow.Field{Name: "w", Type: arrow.BinaryTypes.String, Nullable: true})
			case 2:
				f.Type = arrow.MapOfWithMetadata(arrow.BinaryTypes.String, arrow.Metadata{}, f.Type, arrow.Metadata{})
			default:
				fields[i] = f
				continue
			}
			f.Nullable = rng.IntN(2) == 0
		}
		fields[i] = f
	}
	return arrow.NewSchema(fields, nil)
}

// writeCanonical writes the rows of batches as JSON lines of canonical
// values (see testdata/pyarrow_diff.py).
func writeCanonical(t *testing.T, path string, batches []arrow.RecordBatch) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, rec := range batches {
		for i := range int(rec.NumRows()) {
			row := make([]any, rec.NumCols())
			for c := range row {
				row[c] = canonical(rec.Column(c), i)
			}
			if err := enc.Encode(row); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// canonical is the value of element i as pyarrow_diff.py writes it.
func canonical(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	float := func(x float64) any {
		if math.IsNaN(x) {
			return "NaN"
		}
		return math.Float64bits(x)
	}
	switch a := arr.(type) {
	case *array.Float32:
		return float(float64(a.Value(i)))
	case *array.Float64:
		return float(a.Value(i))
	case *array.Binary:
		return "b:" + hex.EncodeToString(a.Value(i))
	case *array.LargeBinary:
		return "b:" + hex.EncodeToString(a.Value(i))
	case *array.FixedSizeBinary:
		return "b:" + hex.EncodeToString(a.Value(i))
	case *array.Date32:
		return int64(a.Value(i))
	case *array.Dictionary:
		return canonical(a.Dictionary(), a.GetValueIndex(i))
	case *array.Struct:
		out := make([]any, a.NumField())
		for k := range out {
			out[k] = canonical(a.Field(k), i)
		}
		return out
	case *array.Map:
		start, end := a.ValueOffsets(i)
		out := []any{}
		for j := int(start); j < int(end); j++ {
			out = append(out, []any{canonical(a.Keys(), j), canonical(a.Items(), j)})
		}
		return out
	case array.ListLike:
		start, end := a.ValueOffsets(i)
		out := []any{}
		for j := int(start); j < int(end); j++ {
			out = append(out, canonical(a.ListValues(), j))
		}
		return out
	}
	return goValue(arr, i) // integers, booleans, strings, timestamps, decimals
}

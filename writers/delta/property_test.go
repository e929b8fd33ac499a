package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// propertySchema has one column of every type the sink writes, all
// nullable, plus plain and dictionary strings.
func propertySchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "ds", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "ntz", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 12, Scale: 3}, Nullable: true},
		{Name: "bigdec", Type: &arrow.Decimal128Type{Precision: 38, Scale: 6}, Nullable: true},
		{Name: "st", Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
		), Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
}

// randomBatch builds n rows of propertySchema, about a fifth of the
// values null, with pad extra rows in front that are sliced away (a record
// with non-zero array offsets).
func randomBatch(mem memory.Allocator, rng *rand.Rand, n, pad int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, propertySchema())
	defer b.Release()
	words := []string{"", "a", "delta", "ümlaut", "quiver", "x y", "z/="}
	for range n + pad {
		for i, fb := range b.Fields() {
			if rng.IntN(5) == 0 && i != 16 { // struct nulls come from its children below
				fb.AppendNull()
				continue
			}
			switch fb := fb.(type) {
			case *array.Int8Builder:
				fb.Append(int8(rng.IntN(256) - 128))
			case *array.Int16Builder:
				fb.Append(int16(rng.IntN(65536) - 32768))
			case *array.Int32Builder:
				fb.Append(rng.Int32() - rng.Int32())
			case *array.Int64Builder:
				fb.Append(rng.Int64() - rng.Int64())
			case *array.Float32Builder:
				fb.Append(float32(rng.NormFloat64() * 1e3))
			case *array.Float64Builder:
				fb.Append(rng.NormFloat64() * 1e6)
			case *array.BooleanBuilder:
				fb.Append(rng.IntN(2) == 1)
			case *array.StringBuilder:
				fb.Append(words[rng.IntN(len(words))] + fmt.Sprint(rng.IntN(100)))
			case *array.LargeStringBuilder:
				fb.Append(words[rng.IntN(len(words))])
			case *array.BinaryDictionaryBuilder:
				fb.AppendString(words[rng.IntN(3)])
			case *array.BinaryBuilder:
				fb.Append([]byte{byte(rng.IntN(256)), 0, byte(rng.IntN(256))})
			case *array.Date32Builder:
				fb.Append(arrow.Date32(rng.IntN(40000) - 10000))
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(rng.Int64N(4e15) - 1e15))
			case *array.Decimal128Builder:
				fb.Append(decimal128.FromI64(rng.Int64N(2e11) - 1e11))
			case *array.StructBuilder:
				if rng.IntN(5) == 0 {
					fb.AppendNull()
					continue
				}
				fb.Append(true)
				fb.FieldBuilder(0).(*array.Int32Builder).Append(rng.Int32N(100))
				fb.FieldBuilder(1).(*array.StringBuilder).Append(words[rng.IntN(len(words))])
			case *array.ListBuilder:
				fb.Append(true)
				vb := fb.ValueBuilder().(*array.Int64Builder)
				for range rng.IntN(4) {
					if rng.IntN(6) == 0 {
						vb.AppendNull()
					} else {
						vb.Append(rng.Int64N(1000))
					}
				}
			case *array.MapBuilder:
				fb.Append(true)
				for k := range rng.IntN(3) {
					fb.KeyBuilder().(*array.StringBuilder).Append(fmt.Sprint("k", k))
					fb.ItemBuilder().(*array.Int32Builder).Append(rng.Int32N(100))
				}
			default:
				panic(fmt.Sprintf("randomBatch: no generator for %T", fb))
			}
		}
	}
	full := b.NewRecordBatch()
	defer full.Release()
	return full.NewSlice(int64(pad), int64(pad+n))
}

// rowsJSON renders every row of recs as one JSON line each (dictionary and
// large strings render as their values), sorted.
func rowsJSON(t *testing.T, recs []arrow.RecordBatch) []string {
	t.Helper()
	var out []string
	for _, rec := range recs {
		var buf bytes.Buffer
		if err := array.RecordToJSON(rec, &buf); err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(&buf)
		for dec.More() {
			var row map[string]any
			if err := dec.Decode(&row); err != nil {
				t.Fatal(err)
			}
			line, _ := json.Marshal(row) // sorted keys, one form per value
			out = append(out, string(line))
		}
	}
	slices.Sort(out)
	return out
}

// TestPropertyRoundTrip: random batches of every supported type, with
// nulls, slices and dictionaries, written through the sink (several files,
// several commits) read back by parquetio equal what was sent.
func TestPropertyRoundTrip(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			mem := checkedMem(t)
			rng := rand.New(rand.NewPCG(seed, 99))
			cfg := testConfig(memURI(t), func(c *Config) {
				c.TargetFileBytes = 16 << 10 // roll files within a stream
				c.Parquet.RowGroupRows = 100
			})
			w := openWriter(t, cfg, mem)
			ctx := context.Background()
			var sent []arrow.RecordBatch
			defer func() {
				for _, r := range sent {
					r.Release()
				}
			}()
			for c := range 3 {
				key := writers.TxnKey{Writer: "prop", Epoch: int64(c)}
				for range 1 + rng.IntN(3) {
					rec := randomBatch(mem, rng, 1+rng.IntN(400), rng.IntN(7))
					if err := w.Write(ctx, key, rec); err != nil {
						t.Fatal(err)
					}
					sent = append(sent, rec)
				}
				d, err := w.Precommit(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Commit(ctx, key, []writers.Descriptor{d}); err != nil {
					t.Fatal(err)
				}
			}
			got := readTable(t, cfg, mem)
			defer func() {
				for _, r := range got {
					r.Release()
				}
			}()
			want, have := rowsJSON(t, sent), rowsJSON(t, got)
			if len(want) != len(have) {
				t.Fatalf("read %d rows back, sent %d", len(have), len(want))
			}
			for i := range want {
				if want[i] != have[i] {
					t.Fatalf("row %d (sorted) differs:\n sent %s\n read %s", i, want[i], have[i])
				}
			}
		})
	}
}

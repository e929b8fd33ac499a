package parquetio

import (
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestStatsMatchData compares FileStats with bounds and null counts
// computed independently from the written batches.
//
// Batches with and without nulls are mixed (a batch's nulls take another
// conversion path than a dense batch's), and the large case crosses the
// writer's shredding chunks and row groups that are no multiple of them.
func TestStatsMatchData(t *testing.T) {
	schema := allTypesSchema()
	for _, tc := range []struct {
		name      string
		nullRates []float64
		rows      int // per batch, of which the first 11 are sliced off
		groupRows int64
	}{
		{"nulls0", []float64{0, 0, 0}, 261, 200},
		{"nulls0.3", []float64{0.3, 0.3, 0.3}, 261, 200},
		{"nulls1", []float64{1, 1, 1}, 261, 200},
		{"dense-then-nulls", []float64{0, 0.3, 0, 1, 0.3}, 261, 200},
		{"large-mixed", []float64{0, 0.3, 0}, 9022, 10_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rng := rand.New(rand.NewPCG(7, uint64(len(tc.name))))
			var batches []arrow.RecordBatch
			for _, rate := range tc.nullRates {
				full := randomBatch(t, mem, rng, schema, tc.rows, rate)
				batches = append(batches, sliceColumns(full, 11, int64(tc.rows-11)))
				full.Release()
			}
			defer releaseAll(batches)
			_, fs := writeFile(t, schema, Options{RowGroupRows: tc.groupRows}, batches...)

			want := expectedStats(schema, rowsOf(batches))
			if wantRows := int64(len(tc.nullRates) * (tc.rows - 11)); fs.Rows != wantRows {
				t.Errorf("Rows = %d, want %d", fs.Rows, wantRows)
			}
			if len(fs.Columns) != len(want) {
				t.Fatalf("%d stats entries, want %d", len(fs.Columns), len(want))
			}
			types := fieldTypes(schema)
			for i, w := range want {
				got := fs.Columns[i]
				name := strings.Join(w.Path, ".")
				if !reflect.DeepEqual(got.Path, w.Path) {
					t.Fatalf("entry %d is %v, want %v", i, got.Path, w.Path)
				}
				if got.NullCount != w.NullCount {
					t.Errorf("%s: NullCount = %d, want %d", name, got.NullCount, w.NullCount)
				}
				if got.HasMinMax != w.HasMinMax {
					t.Errorf("%s: HasMinMax = %v, want %v", name, got.HasMinMax, w.HasMinMax)
					continue
				}
				if !w.HasMinMax {
					continue
				}
				if lo := normalizeStat(got.Min, types[i]); !reflect.DeepEqual(lo, w.Min) {
					t.Errorf("%s: Min = %#v (%T), want %#v", name, lo, got.Min, w.Min)
				}
				if hi := normalizeStat(got.Max, types[i]); !reflect.DeepEqual(hi, w.Max) {
					t.Errorf("%s: Max = %#v (%T), want %#v", name, hi, got.Max, w.Max)
				}
			}
		})
	}
}

// expectedStats walks the schema like FileStats: top-level columns and
// struct children; lists and maps get null counts only.
func expectedStats(schema *arrow.Schema, rows [][]any) []ColumnStats {
	var out []ColumnStats
	var walk func(f arrow.Field, path []string, get func(row []any) any)
	walk = func(f arrow.Field, path []string, get func(row []any) any) {
		cs := ColumnStats{Path: path}
		var vals []any
		for _, row := range rows {
			if v := get(row); v == nil {
				cs.NullCount++
			} else {
				vals = append(vals, v)
			}
		}
		st, isStruct := f.Type.(*arrow.StructType)
		_, isNested := f.Type.(arrow.NestedType)
		if !isNested && len(vals) > 0 {
			cs.HasMinMax = true
			cs.Min, cs.Max = vals[0], vals[0]
			for _, v := range vals[1:] {
				if less(v, cs.Min, f.Type) {
					cs.Min = v
				}
				if less(cs.Max, v, f.Type) {
					cs.Max = v
				}
			}
		}
		out = append(out, cs)
		if isStruct {
			for k, cf := range st.Fields() {
				walk(cf, append(append([]string(nil), path...), cf.Name), func(row []any) any {
					if s := get(row); s != nil {
						return s.([]any)[k]
					}
					return nil
				})
			}
		}
	}
	for i, f := range schema.Fields() {
		walk(f, []string{f.Name}, func(row []any) any { return row[i] })
	}
	return out
}

// less orders two goValue values of type t.
func less(a, b any, t arrow.DataType) bool {
	if d, ok := t.(*arrow.DictionaryType); ok {
		t = d.ValueType
	}
	switch a := a.(type) {
	case int64:
		return a < b.(int64)
	case float64:
		return a < b.(float64)
	case bool:
		return !a && b.(bool)
	case arrow.Date32:
		return a < b.(arrow.Date32)
	case string:
		if _, ok := t.(*arrow.Decimal128Type); ok {
			x, _ := new(big.Rat).SetString(a)
			y, _ := new(big.Rat).SetString(b.(string))
			return x.Cmp(y) < 0
		}
		return a < b.(string)
	}
	panic("less: unexpected value")
}

// normalizeStat maps a ColumnStats bound of type t to goValue's form.
func normalizeStat(v any, t arrow.DataType) any {
	switch v := v.(type) {
	case []byte:
		return "bin:" + string(v)
	case json.Number:
		return string(v)
	case time.Time:
		if t.ID() == arrow.DATE32 {
			return arrow.Date32(v.Unix() / 86400)
		}
		return v.UnixMicro()
	}
	return v
}

// fieldTypes lists the types of the stats entries, in their order.
func fieldTypes(schema *arrow.Schema) []arrow.DataType {
	var out []arrow.DataType
	var walk func(t arrow.DataType)
	walk = func(t arrow.DataType) {
		out = append(out, t)
		if st, ok := t.(*arrow.StructType); ok {
			for _, f := range st.Fields() {
				walk(f.Type)
			}
		}
	}
	for _, f := range schema.Fields() {
		walk(f.Type)
	}
	return out
}

func TestStatsEdgeCases(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "nan", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "nan32", Type: arrow.PrimitiveTypes.Float32},
		{Name: "neg", Type: &arrow.Decimal128Type{Precision: 30, Scale: 3}},
		{Name: "ts_ns", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32},
		{Name: "flags", Type: arrow.FixedWidthTypes.Boolean},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	b.Field(0).(*array.Float64Builder).AppendValues([]float64{1, math.NaN(), -2}, nil)
	b.Field(1).(*array.Float32Builder).AppendValues([]float32{float32(math.NaN()), 0, 1}, nil)
	dec := b.Field(2).(*array.Decimal128Builder)
	for _, s := range []string{"-12345678901234567890.123", "0.001", "-0.5"} {
		n, err := decimal128.FromString(s, 30, 3)
		if err != nil {
			t.Fatal(err)
		}
		dec.Append(n)
	}
	b.Field(3).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{-1, 1_500, 999}, nil)
	b.Field(4).(*array.Date32Builder).AppendValues([]arrow.Date32{-1, 0, 19000}, nil)
	b.Field(5).(*array.BooleanBuilder).AppendValues([]bool{true, true, true}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()

	_, fs := writeFile(t, schema, Options{}, rec)
	byName := map[string]ColumnStats{}
	for _, c := range fs.Columns {
		byName[c.Path[0]] = c
	}
	for _, name := range []string{"nan", "nan32"} {
		if byName[name].HasMinMax {
			t.Errorf("%s: a NaN column must have no bounds, got %v..%v", name, byName[name].Min, byName[name].Max)
		}
	}
	cases := []struct {
		name     string
		min, max any
	}{
		{"neg", json.Number("-12345678901234567890.123"), json.Number("0.001")},
		// -1ns is in the microsecond before the epoch.
		{"ts_ns", time.UnixMicro(-1).UTC(), time.UnixMicro(1).UTC()},
		{"day", time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(2022, 1, 8, 0, 0, 0, 0, time.UTC)},
		{"flags", true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := byName[c.name]
			if !got.HasMinMax || !reflect.DeepEqual(got.Min, c.min) || !reflect.DeepEqual(got.Max, c.max) {
				t.Fatalf("bounds %v (%T) .. %v, want %v .. %v", got.Min, got.Min, got.Max, c.min, c.max)
			}
		})
	}
}

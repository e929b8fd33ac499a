package kafkaenc

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// build makes a one-column record from a JSON array, released at the end
// of the test.
func build(t *testing.T, mem memory.Allocator, f arrow.Field, values string) arrow.RecordBatch {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{f}, nil)
	rec, _, err := array.RecordFromJSON(mem, schema, strings.NewReader(values))
	if err != nil {
		t.Fatalf("RecordFromJSON(%s): %v", values, err)
	}
	t.Cleanup(rec.Release)
	return rec
}

func encodeJSON(t *testing.T, rec arrow.RecordBatch, opts Options) []string {
	t.Helper()
	enc, err := NewJSON(rec.Schema(), opts)
	if err != nil {
		t.Fatalf("NewJSON: %v", err)
	}
	var out Batch
	if err := enc.Encode(rec, &out); err != nil {
		t.Fatalf("Encode: %v", err)
	}
	rows := make([]string, out.Len())
	for i := range rows {
		rows[i] = string(out.Row(i))
		if !json.Valid(out.Row(i)) {
			t.Errorf("row %d is not valid JSON: %s", i, rows[i])
		}
	}
	return rows
}

func TestJSONTypes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cases := []struct {
		name   string
		typ    arrow.DataType
		in     string
		opts   Options
		values []string
	}{
		{"int64", arrow.PrimitiveTypes.Int64, `[{"c":-9223372036854775808},{"c":null}]`, Options{}, []string{"-9223372036854775808", "null"}},
		{"uint64", arrow.PrimitiveTypes.Uint64, `[{"c":18446744073709551615}]`, Options{}, []string{"18446744073709551615"}},
		{"float64", arrow.PrimitiveTypes.Float64, `[{"c":1.5},{"c":1e21},{"c":1e-7},{"c":0}]`, Options{}, []string{"1.5", "1e+21", "1e-7", "0"}},
		{"bool", arrow.FixedWidthTypes.Boolean, `[{"c":true},{"c":false}]`, Options{}, []string{"true", "false"}},
		{"string", arrow.BinaryTypes.String, `[{"c":"a\"b\\c\n\u0001é\u2028"}]`, Options{}, []string{`"a\"b\\c\n\u0001é\u2028"`}},
		{"binary", arrow.BinaryTypes.Binary, `[{"c":"AQID"}]`, Options{}, []string{`"AQID"`}},
		{"date32", arrow.FixedWidthTypes.Date32, `[{"c":"2024-02-29"},{"c":"1969-12-31"}]`, Options{}, []string{`"2024-02-29"`, `"1969-12-31"`}},
		{"timestamp-us-iso", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, `[{"c":"2024-01-02T03:04:05.123456Z"},{"c":"1969-12-31T23:59:59.5Z"}]`, Options{},
			[]string{`"2024-01-02T03:04:05.123456Z"`, `"1969-12-31T23:59:59.5Z"`}},
		{"timestamp-us-millis", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, `[{"c":"2024-01-02T03:04:05.123456Z"},{"c":"1969-12-31T23:59:59.9995Z"}]`, Options{EpochMillis: true},
			[]string{"1704164645123", "-1"}},
		{"decimal", &arrow.Decimal128Type{Precision: 10, Scale: 2}, `[{"c":"-12.34"},{"c":"0.05"},{"c":"7"}]`, Options{}, []string{`"-12.34"`, `"0.05"`, `"7.00"`}},
		{"list", arrow.ListOf(arrow.PrimitiveTypes.Int32), `[{"c":[1,null,3]},{"c":[]}]`, Options{}, []string{"[1,null,3]", "[]"}},
		{"struct", arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int8, Nullable: true}, arrow.Field{Name: "y", Type: arrow.BinaryTypes.String, Nullable: true}),
			`[{"c":{"x":1,"y":"z"}},{"c":null}]`, Options{}, []string{`{"x":1,"y":"z"}`, "null"}},
		{"map-string", arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), `[{"c":[{"key":"a","value":1}]}]`, Options{}, []string{`{"a":1}`}},
		{"map-int", arrow.MapOf(arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String), `[{"c":[{"key":1,"value":"a"}]}]`, Options{}, []string{`[{"key":1,"value":"a"}]`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := build(t, mem, arrow.Field{Name: "c", Type: tc.typ, Nullable: true}, tc.in)
			got := encodeJSON(t, rec, tc.opts)
			if len(got) != len(tc.values) {
				t.Fatalf("%d rows, want %d", len(got), len(tc.values))
			}
			for i, v := range tc.values {
				if want := `{"c":` + v + `}`; got[i] != want {
					t.Errorf("row %d = %s, want %s", i, got[i], want)
				}
			}
		})
	}
}

func TestJSONNonFiniteFloatsAreNull(t *testing.T) {
	b := array.NewFloat64Builder(memory.DefaultAllocator)
	b.AppendValues([]float64{math.NaN(), math.Inf(1), math.Inf(-1)}, nil)
	arr := b.NewArray()
	defer arr.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "f", Type: arrow.PrimitiveTypes.Float64}}, nil), []arrow.Array{arr}, 3)
	defer rec.Release()
	for i, got := range encodeJSON(t, rec, Options{}) {
		if got != `{"f":null}` {
			t.Errorf("row %d = %s, want null", i, got)
		}
	}
}

// TestJSONMatchesEncodingJSON checks strings and floats against
// encoding/json on random input (including invalid UTF-8).
func TestJSONMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		raw := make([]byte, rng.IntN(12))
		for i := range raw {
			raw[i] = byte(rng.IntN(256))
		}
		if rng.IntN(4) == 0 {
			raw = append(raw, "\u2029<>&"...)
		}
		want, _ := json.Marshal(string(raw))
		// encoding/json escapes <, > and & for HTML; Kafka values need not.
		w := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(want))
		if got := string(appendJSONString(nil, string(raw))); got != w {
			t.Fatalf("appendJSONString(%q) = %s, want %s", raw, got, w)
		}
		f := math.Float64frombits(rng.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		wantF, _ := json.Marshal(f)
		if got := string(appendJSONFloat(nil, f, 64)); got != string(wantF) {
			t.Fatalf("appendJSONFloat(%v) = %s, want %s", f, got, wantF)
		}
		f32 := math.Float32frombits(rng.Uint32())
		if math.IsNaN(float64(f32)) || math.IsInf(float64(f32), 0) {
			continue
		}
		wantF32, _ := json.Marshal(f32)
		if got := string(appendJSONFloat(nil, float64(f32), 32)); got != string(wantF32) {
			t.Fatalf("appendJSONFloat(float32 %v) = %s, want %s", f32, got, wantF32)
		}
	}
}

func TestDecimalText(t *testing.T) {
	cases := []struct {
		v     decimal128.Num
		scale int32
		want  string
	}{
		{decimal128.FromI64(-1234), 2, "-12.34"},
		{decimal128.FromI64(5), 3, "0.005"},
		{decimal128.FromI64(math.MinInt64), 0, "-9223372036854775808"},
		{decimal128.New(1, 0), 0, "18446744073709551616"},
	}
	for _, tc := range cases {
		if got := string(appendDecimal128(nil, tc.v, tc.scale)); got != tc.want {
			t.Errorf("appendDecimal128(%v, %d) = %s, want %s", tc.v, tc.scale, got, tc.want)
		}
	}
}

func TestJSONRejectsUnsupportedType(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "iv", Type: arrow.FixedWidthTypes.MonthInterval}}, nil)
	if _, err := NewJSON(schema, Options{}); err == nil || !strings.Contains(err.Error(), `"iv"`) {
		t.Fatalf("NewJSON(month interval) = %v, want an error naming the column", err)
	}
}

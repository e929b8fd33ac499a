package deltalog

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
)

func TestArrowDeltaRoundTrip(t *testing.T) {
	cases := []struct {
		in    arrow.DataType
		delta string
		back  arrow.DataType // nil: same as in
	}{
		{arrow.PrimitiveTypes.Int8, `"byte"`, nil},
		{arrow.PrimitiveTypes.Int16, `"short"`, nil},
		{arrow.PrimitiveTypes.Int32, `"integer"`, nil},
		{arrow.PrimitiveTypes.Int64, `"long"`, nil},
		{arrow.PrimitiveTypes.Float32, `"float"`, nil},
		{arrow.PrimitiveTypes.Float64, `"double"`, nil},
		{arrow.FixedWidthTypes.Boolean, `"boolean"`, nil},
		{arrow.BinaryTypes.String, `"string"`, nil},
		{arrow.BinaryTypes.LargeString, `"string"`, arrow.BinaryTypes.String},
		{arrow.BinaryTypes.Binary, `"binary"`, nil},
		{arrow.BinaryTypes.LargeBinary, `"binary"`, arrow.BinaryTypes.Binary},
		{arrow.FixedWidthTypes.Date32, `"date"`, nil},
		{&arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "Europe/Paris"}, `"timestamp"`, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{&arrow.TimestampType{Unit: arrow.Millisecond}, `"timestamp_ntz"`, &arrow.TimestampType{Unit: arrow.Microsecond}},
		{&arrow.Decimal128Type{Precision: 38, Scale: 9}, `"decimal(38,9)"`, nil},
		{&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, `"string"`, arrow.BinaryTypes.String},
		{arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}),
			`{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}}]}`, nil},
		{arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Int64, Nullable: true}),
			`{"type":"array","elementType":"long","containsNull":true}`, nil},
		{arrow.MapOfFields(arrow.Field{Name: "key", Type: arrow.BinaryTypes.String}, arrow.Field{Name: "value", Type: arrow.PrimitiveTypes.Float64}),
			`{"type":"map","keyType":"string","valueType":"double","valueContainsNull":false}`, nil},
	}
	for _, c := range cases {
		t.Run(c.in.String(), func(t *testing.T) {
			s, err := FromArrow(arrow.NewSchema([]arrow.Field{{Name: "c", Type: c.in, Nullable: true}}, nil))
			if err != nil {
				t.Fatal(err)
			}
			want := `{"type":"struct","fields":[{"name":"c","type":` + c.delta + `,"nullable":true,"metadata":{}}]}`
			if got := s.String(); got != want {
				t.Fatalf("schemaString\n got %s\nwant %s", got, want)
			}
			parsed, err := ParseSchema(s.String())
			if err != nil {
				t.Fatal(err)
			}
			back, err := parsed.ToArrow()
			if err != nil {
				t.Fatal(err)
			}
			wantBack := c.back
			if wantBack == nil {
				wantBack = c.in
			}
			if !arrow.TypeEqual(back.Field(0).Type, wantBack) || !back.Field(0).Nullable {
				t.Fatalf("back to Arrow: %s, want %s", back.Field(0).Type, wantBack)
			}
		})
	}
}

func TestFromArrowRefuses(t *testing.T) {
	for _, typ := range []arrow.DataType{
		arrow.PrimitiveTypes.Uint64, arrow.FixedWidthTypes.Float16, arrow.FixedWidthTypes.Time32s,
		arrow.FixedWidthTypes.Duration_ms, arrow.StructOf(arrow.Field{Name: "bad", Type: arrow.FixedWidthTypes.MonthInterval}),
	} {
		_, err := FromArrow(arrow.NewSchema([]arrow.Field{{Name: "col", Type: typ}}, nil))
		if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), `"col`) {
			t.Errorf("%s: %v, want ErrInvalid naming the column", typ, err)
		}
	}
}

func TestParseSchemaTolerant(t *testing.T) {
	s, err := ParseSchema(`{"type":"struct","fields":[{"name":"d","type":"decimal(10, 2)","nullable":true,"metadata":{"delta.columnMapping.id":5,"x":"y"}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if f := s.Fields[0]; f.Type.Precision != 10 || f.Type.Scale != 2 || string(f.Metadata["delta.columnMapping.id"]) != "5" {
		t.Fatalf("field %+v", f)
	}
	if !strings.Contains(s.String(), `"metadata":{"delta.columnMapping.id":5,"x":"y"}`) {
		t.Fatalf("metadata not preserved: %s", s.String())
	}
	if _, err := ParseSchema(`{"type":"struct","fields":[{"name":"a","type":"long"},{"name":"A","type":"long"}]}`); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("case-insensitive duplicate: %v", err)
	}
}

func TestNewTableFeatures(t *testing.T) {
	acts, err := NewTable(arrow.NewSchema([]arrow.Field{{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Microsecond}}}, nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := acts[0].Protocol
	if p.MinReaderVersion != 3 || p.MinWriterVersion != 7 || p.ReaderFeatures[0] != "timestampNtz" || p.WriterFeatures[0] != "timestampNtz" {
		t.Fatalf("protocol %+v", p)
	}
	acts, err = NewTable(arrow.NewSchema([]arrow.Field{{Name: "t", Type: arrow.PrimitiveTypes.Int64}}, nil), nil,
		map[string]string{"delta.enableDeletionVectors": "true", "delta.appendOnly": "true"})
	if err != nil {
		t.Fatal(err)
	}
	p = acts[0].Protocol
	if p.MinReaderVersion != 3 || p.MinWriterVersion != 7 ||
		!slices.Equal(p.ReaderFeatures, []string{"deletionVectors"}) || !slices.Equal(p.WriterFeatures, []string{"appendOnly", "deletionVectors"}) {
		t.Fatalf("deletion vector protocol %+v", p)
	}
	for _, bad := range []struct {
		parts []string
		conf  map[string]string
	}{
		{[]string{"nope"}, nil},
		{[]string{"t"}, nil}, // every column partitioned
		{nil, map[string]string{"delta.enableRowTracking": "true"}},
	} {
		if _, err := NewTable(arrow.NewSchema([]arrow.Field{{Name: "t", Type: arrow.PrimitiveTypes.Int64}}, nil), bad.parts, bad.conf); !errors.Is(err, writers.ErrInvalid) {
			t.Errorf("NewTable(%v, %v) = %v, want ErrInvalid", bad.parts, bad.conf, err)
		}
	}
}

func TestBuildParseStats(t *testing.T) {
	long := strings.Repeat("z", 40)
	ts := time.Date(2021, 11, 18, 2, 30, 0, 123456789, time.UTC)
	got, err := BuildStats(3, []ColumnStat{
		{Path: []string{"id"}, Min: int64(-1), Max: int64(9), NullCount: 0},
		{Path: []string{"s"}, Min: long, Max: long, NullCount: 1},
		{Path: []string{"n", "ts"}, Min: ts, Max: TimestampNTZ(ts), NullCount: 2},
		{Path: []string{"d"}, Min: Decimal("-12.30"), Max: Date(ts), NullCount: -1},
		{Path: []string{"b"}, Min: true, Max: []byte("x"), NullCount: 0},
		{Path: []string{"f"}, Min: 0.5, Max: float32(1.5), NullCount: 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"numRecords":3,"minValues":{"d":-12.30,"f":0.5,"id":-1,"n":{"ts":"2021-11-18T02:30:00.123Z"},"s":"` + strings.Repeat("z", 32) + `"},` +
		`"maxValues":{"d":"2021-11-18","f":1.5,"id":9,"n":{"ts":"2021-11-18T02:30:00.123"},"s":"` + strings.Repeat("z", 31) + `{"},` +
		`"nullCount":{"b":0,"f":0,"id":0,"n":{"ts":2},"s":1}}`
	if got != want {
		t.Fatalf("stats\n got %s\nwant %s", got, want)
	}
	st, err := ParseStats(got)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := st.Min("d"); !ok || v.(interface{ String() string }).String() != "-12.30" {
		t.Errorf("min d = %v (decimals must stay exact)", v)
	}
	if v, ok := st.Max("n", "ts"); !ok || v != "2021-11-18T02:30:00.123" {
		t.Errorf("max n.ts = %v", v)
	}
	if n, ok := st.Nulls("n", "ts"); !ok || n != 2 || st.NumRecords != 3 {
		t.Errorf("nullCount n.ts = %d %v, numRecords %d", n, ok, st.NumRecords)
	}
	if _, err := BuildStats(1, []ColumnStat{{Path: []string{"x"}, Min: struct{}{}}}); err == nil {
		t.Error("unsupported stat type accepted")
	}
}

func TestPartitionValuesAndPaths(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		value   any
		text    *string
		typ     string
		dir     string
		addPath string
	}{
		{"A/A", str("A/A"), "string", "x=A%2FA/", "x=A%252FA/"},
		{"bar+%21", str("bar+%21"), "string", "x=bar+%2521/", "x=bar+%252521/"},
		{nil, nil, "string", "x=__HIVE_DEFAULT_PARTITION__/", "x=__HIVE_DEFAULT_PARTITION__/"},
		{int64(-5), str("-5"), "long", "x=-5/", "x=-5/"},
		{true, str("true"), "boolean", "x=true/", "x=true/"},
		{Date(time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)), str("2024-01-02"), "date", "x=2024-01-02/", "x=2024-01-02/"},
		{time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC), str("2024-01-01T10:00:00.000000Z"), "timestamp",
			"x=2024-01-01T10%3A00%3A00.000000Z/", "x=2024-01-01T10%253A00%253A00.000000Z/"},
		{TimestampNTZ(time.Date(2013, 7, 5, 17, 1, 0, 123456000, time.UTC)), str("2013-07-05 17:01:00.123456"), "timestamp_ntz",
			"x=2013-07-05 17%3A01%3A00.123456/", "x=2013-07-05%2017%253A01%253A00.123456/"},
	}
	for _, c := range cases {
		text, err := FormatPartitionValue(c.value)
		if err != nil {
			t.Fatal(err)
		}
		if (text == nil) != (c.text == nil) || (text != nil && *text != *c.text) {
			t.Errorf("%v: text %v, want %v", c.value, text, c.text)
			continue
		}
		dir := PartitionDir([]string{"x"}, map[string]*string{"x": text})
		if dir != c.dir || EncodePath(dir) != c.addPath {
			t.Errorf("%v: dir %q path %q, want %q %q", c.value, dir, EncodePath(dir), c.dir, c.addPath)
		}
		if key, err := DecodePath(EncodePath(dir + "f.parquet")); err != nil || key != dir+"f.parquet" {
			t.Errorf("%v: decode = %q, %v", c.value, key, err)
		}
		back, err := ParsePartitionValue(text, DataType{Name: c.typ})
		if err != nil {
			t.Fatal(err)
		}
		if bt, ok := back.(time.Time); ok {
			if !bt.Equal(c.value.(time.Time)) {
				t.Errorf("%v: parsed back %v", c.value, back)
			}
		} else if back != c.value {
			t.Errorf("%v: parsed back %#v", c.value, back)
		}
	}
	if v, err := ParsePartitionValue(str("1.0E10"), DataType{Name: "double"}); err != nil || v != 1e10 {
		t.Errorf("Java float syntax: %v, %v", v, err)
	}
	if _, err := DecodePath("s3://bucket/x.parquet"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("absolute path: %v", err)
	}
}

// Float partition values are spelled as Java's Double.toString and
// Float.toString spell them, since Java readers parse them with
// Double.parseDouble (which refuses Go's "+Inf"); both spellings read back.
func TestFloatPartitionValues(t *testing.T) {
	cases := []struct {
		value any
		java  string
		goOld string // what Quiver wrote before, still read
	}{
		{math.Inf(1), "Infinity", "+Inf"},
		{math.Inf(-1), "-Infinity", "-Inf"},
		{math.NaN(), "NaN", "NaN"},
		{1e21, "1.0E21", "1e+21"},
		{1.5, "1.5", "1.5"},
		{0.001, "0.001", "0.001"},
		{1e-4, "1.0E-4", "0.0001"},
		{9.5e-4, "9.5E-4", "0.00095"},
		{100.0, "100.0", "100"},
		{9999999.0, "9999999.0", "9.999999e+06"},
		{1e7, "1.0E7", "1e+07"},
		{-12345678.9, "-1.23456789E7", "-1.23456789e+07"},
		{0.0, "0.0", "0"},
		{math.Copysign(0, -1), "-0.0", "-0"},
		{math.MaxFloat64, "1.7976931348623157E308", "1.7976931348623157e+308"},
		{5e-324, "4.9E-324", "5e-324"},
		{float32(1.1), "1.1", "1.1"},
		{float32(1e10), "1.0E10", "1e+10"},
		{float32(3.4028235e38), "3.4028235E38", "3.4028235e+38"},
		{float32(math.Inf(-1)), "-Infinity", "-Inf"},
		{float32(0.25), "0.25", "0.25"},
		{float32(1.4e-45), "1.4E-45", "1e-45"},
		{float32(0.001), "0.001", "0.001"},
		{float32(123456.79), "123456.79", "123456.79"},
	}
	for _, c := range cases {
		typ := DataType{Name: "double"}
		want := c.value
		if f, ok := c.value.(float32); ok {
			typ, want = DataType{Name: "float"}, float64(f)
		}
		text, err := FormatPartitionValue(c.value)
		if err != nil || *text != c.java {
			t.Errorf("%v (%T): %v %v, want %s", c.value, c.value, deref(text), err, c.java)
		}
		for _, s := range []string{c.java, c.goOld} {
			back, err := ParsePartitionValue(&s, typ)
			if err != nil {
				t.Errorf("%s: %v", s, err)
				continue
			}
			f := back.(float64)
			if typ.Name == "float" {
				f = float64(float32(f))
			}
			if w := want.(float64); f != w && !(math.IsNaN(f) && math.IsNaN(w)) || math.Signbit(f) != math.Signbit(w) {
				t.Errorf("%s parsed as %v, want %v", s, f, w)
			}
		}
	}
}

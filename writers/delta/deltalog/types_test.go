package deltalog

import (
	"errors"
	"slices"
	"strings"
	"testing"

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

package kafkaenc_test

import (
	"context"
	"encoding/binary"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/quiver-ingest/quiver/writers/kafka/kafkaenc"
	"github.com/quiver-ingest/quiver/writers/kafka/kafkaenc/srfake"
)

func TestAvroRoundTripThroughRegistry(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "blob", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "price", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "attrs", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32)},
		{Name: "pt", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32}, arrow.Field{Name: "y-y", Type: arrow.PrimitiveTypes.Float32, Nullable: true})},
	}, nil)
	rec, _, err := array.RecordFromJSON(mem, schema, strings.NewReader(`[
		{"id":1,"name":"ann","score":1.5,"ok":true,"blob":"AQI=","day":"2024-02-29","at":"2024-01-02T03:04:05.123456Z","price":"-12.34","tags":["a","b"],"attrs":[{"key":"k","value":7}],"pt":{"x":1,"y-y":2.5}},
		{"id":-2,"name":null,"score":null,"ok":false,"blob":null,"day":"1970-01-01","at":"1970-01-01T00:00:00Z","price":"1000.00","tags":null,"attrs":[],"pt":{"x":-1,"y-y":null}}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()

	srv := srfake.Start(t)
	reg, err := kafkaenc.NewRegistry("events-value", sr.URLs(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := kafkaenc.NewAvro(schema, "events")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := reg.Register(ctx, enc.SchemaText())
	if err != nil {
		t.Fatal(err)
	}
	enc.SetID(id)
	var out kafkaenc.Batch
	if err := enc.Encode(rec, &out); err != nil {
		t.Fatal(err)
	}

	text, err := reg.SchemaByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := avro.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"id": int64(1), "name": "ann", "score": 1.5, "ok": true, "blob": []byte{1, 2}, "day": time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC),
			"at": time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC), "price": big.NewRat(-1234, 100), "tags": map[string]any{"array": []any{"a", "b"}}, // hamba names the union branch
			"attrs": map[string]any{"k": 7}, "pt": map[string]any{"x": 1, "y_y": float32(2.5)}},
		{"id": int64(-2), "name": nil, "score": nil, "ok": false, "blob": nil, "day": time.Unix(0, 0).UTC(),
			"at": time.Unix(0, 0).UTC(), "price": big.NewRat(1000, 1), "tags": nil,
			"attrs": map[string]any{}, "pt": map[string]any{"x": -1, "y_y": nil}},
	}
	if out.Len() != len(want) {
		t.Fatalf("%d records, want %d", out.Len(), len(want))
	}
	for i := range want {
		msg := out.Row(i)
		if msg[0] != 0 || int(binary.BigEndian.Uint32(msg[1:5])) != id {
			t.Fatalf("record %d header % x, want magic 0 and id %d", i, msg[:5], id)
		}
		var got map[string]any
		if err := avro.Unmarshal(parsed, msg[5:], &got); err != nil {
			t.Fatalf("record %d: decode: %v", i, err)
		}
		for k, w := range want[i] {
			g := got[k]
			if wr, ok := w.(*big.Rat); ok {
				if gr, ok := g.(*big.Rat); !ok || gr.Cmp(wr) != 0 {
					t.Errorf("record %d %s = %v, want %v", i, k, g, w)
				}
				continue
			}
			if wt, ok := w.(time.Time); ok {
				if gt, ok := g.(time.Time); !ok || !gt.Equal(wt) {
					t.Errorf("record %d %s = %v, want %v", i, k, g, w)
				}
				continue
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("record %d %s = %#v, want %#v", i, k, g, w)
			}
		}
	}

	// The same schema is registered once; a changed one gets a new id.
	if again, err := reg.Register(ctx, enc.SchemaText()); err != nil || again != id {
		t.Fatalf("re-register = %d, %v; want %d", again, err, id)
	}
	if got := srv.Versions("events-value"); len(got) != 1 {
		t.Fatalf("subject versions %v, want one", got)
	}
}

func TestAvroSchemaRejects(t *testing.T) {
	cases := []struct {
		name   string
		fields []arrow.Field
		want   string
	}{
		{"int-keyed map", []arrow.Field{{Name: "m", Type: arrow.MapOf(arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int32)}}, `"m"`},
		{"colliding names", []arrow.Field{{Name: "a-b", Type: arrow.PrimitiveTypes.Int32}, {Name: "a_b", Type: arrow.PrimitiveTypes.Int32}}, "rename"},
		{"interval", []arrow.Field{{Name: "iv", Type: arrow.FixedWidthTypes.MonthInterval}}, `"iv"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := kafkaenc.AvroSchema(arrow.NewSchema(tc.fields, nil), "t")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("AvroSchema = %v, want an error containing %s", err, tc.want)
			}
		})
	}
}

func TestAvroNullInNonNullableColumn(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := array.NewInt64Builder(mem)
	b.AppendNull()
	arr := b.NewArray()
	b.Release()
	defer arr.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{arr}, 1)
	defer rec.Release()
	enc, err := kafkaenc.NewAvro(schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	var out kafkaenc.Batch
	if err := enc.Encode(rec, &out); err == nil || !strings.Contains(err.Error(), `"id"`) {
		t.Fatalf("Encode = %v, want an error naming the column", err)
	}
}

package server

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quiver "github.com/quiver-ingest/quiver/clients/go"
)

// TestDeltaStreamSchemaAdmission: once a Delta table exists, streams are
// admitted by the sink's own rule (writers.SchemaChecker), not by equality
// with the table's Arrow schema: another encoding of a column's type,
// under add_columns a new nullable column, and then a stream lacking it
// (an older client) are accepted; a new column under reject is refused
// naming it.
func TestDeltaStreamSchemaAdmission(t *testing.T) {
	s := startServer(t, `endpoints:
  - name: evolving
    sink: delta
    delta: {table_uri: "file://tables/evolving", schema_evolution: add_columns}
  - name: strict
    sink: delta
    delta: {table_uri: "file://tables/strict"}
`)
	c, err := quiver.Dial(s.FlightAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	id := arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64}
	plain := arrow.Field{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}
	dict := arrow.Field{Name: "name", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, Nullable: true}
	extra := arrow.Field{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true}

	put := func(endpoint string, fields ...arrow.Field) error {
		t.Helper()
		schema := arrow.NewSchema(fields, nil)
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		for i, f := range fields {
			switch bb := b.Field(i).(type) {
			case *array.Int64Builder:
				bb.AppendValues([]int64{1, 2}, nil)
			case *array.StringBuilder:
				bb.AppendValues([]string{"a", "b"}, nil)
			case *array.BinaryDictionaryBuilder:
				bb.AppendString("a")
				bb.AppendString("b")
			case *array.Float64Builder:
				bb.AppendValues([]float64{0.5, 1.5}, nil)
			default:
				t.Fatalf("no builder for %s", f.Type)
			}
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		rdr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
		if err != nil {
			t.Fatal(err)
		}
		defer rdr.Release()
		_, err = c.Put(t.Context(), endpoint, rdr)
		return err
	}

	for _, ep := range []string{"evolving", "strict"} {
		if err := put(ep, id, plain); err != nil {
			t.Fatalf("%s: create: %v", ep, err)
		}
		if err := put(ep, id, dict); err != nil {
			t.Errorf("%s: dictionary-encoded strings into a string column: %v", ep, err)
		}
	}
	if err := put("evolving", id, plain, extra); err != nil {
		t.Errorf("evolving: new nullable column under add_columns: %v", err)
	}
	if err := put("evolving", id, plain); err != nil {
		t.Errorf("evolving: a client that lacks the added nullable column: %v", err)
	}
	err = put("strict", id, plain, extra)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"score"`) || !strings.Contains(err.Error(), "schema_evolution") {
		t.Errorf("strict: new column under reject: %v, want InvalidArgument naming score and schema_evolution", err)
	}
}

package merge

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiver-ingest/quiver/writers"
)

func TestOpValues(t *testing.T) {
	for _, tc := range []struct {
		name    string
		op      string // JSON value of _op for key 1's second row
		live    []string
		deleted []string
		wantErr bool
	}{
		{name: "I", op: `"I"`, live: []string{"1|b"}},
		{name: "U", op: `"U"`, live: []string{"1|b"}},
		{name: "r snapshot read", op: `"r"`, live: []string{"1|b"}},
		{name: "null means upsert", op: `null`, live: []string{"1|b"}},
		{name: "D", op: `"D"`, deleted: []string{"1"}},
		{name: "R is not r", op: `"R"`, wantErr: true},
		{name: "lowercase d", op: `"d"`, wantErr: true},
		{name: "empty", op: `""`, wantErr: true},
		{name: "word", op: `"INSERT"`, wantErr: true},
	} {
		for _, opType := range []arrow.DataType{
			arrow.BinaryTypes.String,
			arrow.BinaryTypes.LargeString,
			&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String},
		} {
			t.Run(tc.name+"/"+opType.String(), func(t *testing.T) {
				mem := checkedMem(t)
				schema := arrow.NewSchema([]arrow.Field{
					{Name: "id", Type: arrow.PrimitiveTypes.Int64},
					{Name: "_op", Type: opType, Nullable: true},
					{Name: "v", Type: arrow.BinaryTypes.String},
				}, nil)
				rec := fromJSON(t, mem, schema, `[{"id":1,"_op":"I","v":"a"},{"id":1,"_op":`+tc.op+`,"v":"b"}]`)
				res, err := collapseAll(t, mem, []string{"id"}, rec)
				if tc.wantErr {
					var re *RowError
					if !errors.As(err, &re) || !errors.Is(err, writers.ErrInvalid) {
						t.Fatalf("got %v, want a *RowError wrapping ErrInvalid", err)
					}
					if re.Row != 1 || re.StreamRow != 1 || re.Column != "_op" {
						t.Errorf("row error %+v, want row 1 of column _op", re)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				defer res.Release()
				equalStrings(t, "live", rowStrings(res.Live), tc.live)
				equalStrings(t, "deleted", rowStrings(res.Deleted), tc.deleted)
			})
		}
	}
}

func TestOpColumnAbsentMeansUpsert(t *testing.T) {
	mem := checkedMem(t)
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	res, err := collapseAll(t, mem, []string{"id"}, fromJSON(t, mem, schema, `[{"id":1,"v":1},{"id":2,"v":2},{"id":1,"v":3}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	equalStrings(t, "live", rowStrings(res.Live), []string{"2|2", "1|3"})
	if res.RowsIn != 3 || res.LiveRows != 2 || res.DeletedRows != 0 {
		t.Errorf("counts in=%d live=%d deleted=%d, want 3 2 0", res.RowsIn, res.LiveRows, res.DeletedRows)
	}
}

func TestBadMetadataTypes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		field arrow.Field
	}{
		{"op int", arrow.Field{Name: "_op", Type: arrow.PrimitiveTypes.Int32}},
		{"op binary", arrow.Field{Name: "_op", Type: arrow.BinaryTypes.Binary}},
		{"op dictionary of int", arrow.Field{Name: "_op", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.PrimitiveTypes.Int32}}},
		{"weight int32", arrow.Field{Name: "__weight", Type: arrow.PrimitiveTypes.Int32}},
		{"weight string", arrow.Field{Name: "__weight", Type: arrow.BinaryTypes.String}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, tc.field}, nil)
			_, err := NewCollapser(schema, Options{Keys: []string{"id"}})
			if !errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
}

func TestStripMetadata(t *testing.T) {
	mem := checkedMem(t)
	md := arrow.NewMetadata([]string{"k"}, []string{"v"})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "_op", Type: arrow.BinaryTypes.String},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "_ts_ms", Type: arrow.PrimitiveTypes.Int64},
		{Name: "_other", Type: arrow.PrimitiveTypes.Int64},
		{Name: "__weight", Type: arrow.PrimitiveTypes.Int64},
	}, &md)
	got := StripMetadata(schema)
	if got.NumFields() != 2 || got.Field(0).Name != "id" || got.Field(1).Name != "_other" {
		t.Fatalf("stripped schema %s, want id and _other", got)
	}
	if v, _ := got.Metadata().GetValue("k"); v != "v" {
		t.Errorf("schema metadata lost: %v", got.Metadata())
	}
	if plain := StripMetadata(got); plain != got {
		t.Error("a schema without metadata columns must be returned as is")
	}

	rec := fromJSON(t, mem, schema, `[{"_op":"I","id":7,"_ts_ms":1,"_other":2,"__weight":1}]`)
	defer rec.Release()
	stripped := StripMetadataRecord(rec)
	defer stripped.Release()
	equalStrings(t, "stripped", rowStrings([]arrow.RecordBatch{stripped}), []string{"7|2"})

	plainRec := array.NewRecordBatch(got, stripped.Columns(), stripped.NumRows())
	defer plainRec.Release()
	same := StripMetadataRecord(plainRec)
	defer same.Release()
	if same != plainRec {
		t.Error("a record without metadata columns must be returned as is")
	}
	for _, name := range MetadataColumns() {
		if !IsMetadataColumn(name) {
			t.Errorf("IsMetadataColumn(%q) = false", name)
		}
	}
	if IsMetadataColumn("_other") {
		t.Error(`IsMetadataColumn("_other") = true`)
	}
}

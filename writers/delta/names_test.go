package delta

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

// TestColumnNames lists the column-name rules of Delta Lake on Spark (see
// deltalayout/names.go), each with Spark's own error as a comment: a stream breaking
// one is refused with ErrInvalid naming the column and the rule, by
// CheckSchema and by Write on an endpoint without a table (which its
// first commit would create), before anything is staged; names Spark
// accepts are accepted.
func TestColumnNames(t *testing.T) {
	i64 := arrow.PrimitiveTypes.Int64
	col := func(name string) arrow.Field { return arrow.Field{Name: name, Type: i64, Nullable: true} }
	strct := func(name string, fields ...arrow.Field) arrow.Field {
		return arrow.Field{Name: name, Type: arrow.StructOf(fields...), Nullable: true}
	}
	refused := []struct {
		name   string
		fields []arrow.Field
		column string // the path the error names
	}{
		// [DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES] Found invalid
		// character(s) among ' ,;{}()\n\t=' in the column names of your
		// schema. Invalid column names: prix ttc.
		{"space", []arrow.Field{col("prix ttc")}, "prix ttc"},
		{"comma", []arrow.Field{col("a,b")}, "a,b"},
		{"semicolon", []arrow.Field{col("a;b")}, "a;b"},
		{"open-brace", []arrow.Field{col("a{b")}, "a{b"},
		{"close-brace", []arrow.Field{col("a}b")}, "a}b"},
		{"open-paren", []arrow.Field{col("f(x")}, "f(x"},
		{"close-paren", []arrow.Field{col("x)")}, "x)"},
		{"newline", []arrow.Field{col("a\nb")}, "a\nb"},
		{"tab", []arrow.Field{col("a\tb")}, "a\tb"},
		{"equals", []arrow.Field{col("k=v")}, "k=v"},
		// The same, for the nested names SchemaMergingUtils
		// .explodeNestedFieldNames lists: Invalid column names: s.a b.
		{"struct-field", []arrow.Field{col("id"), strct("s", col("a b"))}, "s.a b"},
		{"list-element-field", []arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.StructOf(col("x=y"))), Nullable: true}}, "l.element.x=y"},
		{"map-value-field", []arrow.Field{{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.StructOf(col("k;v"))), Nullable: true}}, "m.value.k;v"},
		// [DELTA_DUPLICATE_COLUMNS_FOUND] Found duplicate column(s) in the
		// data to save: id (Spark compares names case-insensitively).
		{"duplicate-case", []arrow.Field{col("ID"), col("id")}, "id"},
		{"duplicate-nested", []arrow.Field{strct("s", col("a"), col("A"))}, "s.A"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			c := newTC(t, memURI(t))
			schema := arrow.NewSchema(tc.fields, nil)
			named := strconv.Quote(tc.column)
			if err := c.w.CheckSchema(c.ctx, schema); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), named) {
				t.Fatalf("CheckSchema: %v, want ErrInvalid naming %s", err, named)
			}
			rec := writertest.ZeroRecord(c.mem, schema, 2)
			defer rec.Release()
			key := writers.AutoKey("s")
			if err := c.w.Write(c.ctx, key, rec); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), named) {
				t.Fatalf("Write: %v, want ErrInvalid naming %s", err, named)
			}
			if err := c.w.Rollback(c.ctx, key); err != nil {
				t.Fatal(err)
			}
			if objs := c.dataObjects(); len(objs) > 0 {
				t.Fatalf("a refused stream staged %v", objs)
			}
		})
	}

	// Spark accepts these: '.' (quoted with backticks in SQL), non-ASCII
	// letters, names that only look reserved, the same name in two
	// structs.
	accepted := []arrow.Field{col("prix.€"), col("naïve"), col("a-b"), col("_rowid"), strct("s", col("a"), col("x.y")), strct("t", col("a"))}
	c := newTC(t, memURI(t))
	schema := arrow.NewSchema(accepted, nil)
	if err := c.w.CheckSchema(c.ctx, schema); err != nil {
		t.Fatalf("CheckSchema of names Spark accepts: %v", err)
	}
	c.put(writers.AutoKey("ok"), writertest.ZeroRecord(c.mem, schema, 3))
	if got := publishedRows(t, c.cfg); got != 3 {
		t.Fatalf("%d rows published, want 3", got)
	}
}

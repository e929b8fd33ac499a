package deltalayout

import (
	"encoding/json"
	"strings"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// Reconcile checks the Delta schema of incoming rows (got) against the
// table's (table) and returns the schema the rows' files follow: the
// table's columns, then the new ones when evolve allows them. Columns match
// by exact name; types must be equal (column metadata aside); a column the
// table declares non-nullable accepts only non-nullable input (identity
// columns aside: nullableInput). Input may
// lack nullable table columns, as Delta's schema enforcement allows (a
// client that does not know a column another one added): their values
// are null. Every mismatch is ErrInvalid naming the column.
func Reconcile(table, got *deltalog.Schema, evolve bool) (*deltalog.Schema, error) {
	merged := &deltalog.Schema{Fields: append([]deltalog.StructField(nil), table.Fields...)}
	lower := make(map[string]string, len(table.Fields))
	for _, f := range table.Fields {
		lower[strings.ToLower(f.Name)] = f.Name
	}
	for _, g := range got.Fields {
		t, ok := table.Field(g.Name)
		if !ok {
			if other, clash := lower[strings.ToLower(g.Name)]; clash {
				return nil, writers.Errorf(writers.ErrInvalid, "delta: column %q clashes with the table's column %q (Delta column names are case-insensitive): rename it", g.Name, other)
			}
			if !evolve {
				return nil, writers.Errorf(writers.ErrInvalid, "delta: column %q (%s) is not in the table and schema_evolution is reject: drop the column or set schema_evolution: add_columns", g.Name, g.Type)
			}
			if !g.Nullable {
				return nil, writers.Errorf(writers.ErrInvalid, "delta: new column %q (%s) is not nullable, but existing rows have no value for it: send it as a nullable field", g.Name, g.Type)
			}
			merged.Fields = append(merged.Fields, g)
			lower[strings.ToLower(g.Name)] = g.Name
			continue
		}
		if !sameType(t.Type, g.Type) {
			if path, ok := newNestedField(g.Name, t.Type, g.Type); ok {
				return nil, writers.Errorf(writers.ErrInvalid, "delta: column %q has the field %q, which the table's struct lacks: Quiver adds top-level columns only (schema_evolution: add_columns), not fields inside a struct; add the field to the table first (Spark: ALTER TABLE … ADD COLUMNS (%s %s)) or send it as a top-level column", g.Name, path, path, nestedType(g.Type, path))
			}
			return nil, writers.Errorf(writers.ErrInvalid, "delta: column %q has type %s, the table's is %s: cast it (changing a column's type is not supported)", g.Name, typeJSON(g.Type), typeJSON(t.Type))
		}
		if g.Nullable && !nullableInput(t) {
			return nil, writers.Errorf(writers.ErrInvalid, "delta: column %q is nullable, the table's is not: send it as a non-nullable field", g.Name)
		}
	}
	for _, t := range table.Fields {
		if _, ok := got.Field(t.Name); !ok && !nullableInput(t) {
			return nil, writers.Errorf(writers.ErrInvalid, "delta: column %q (%s) of the table is missing and not nullable: send it (the table's columns: %s)", t.Name, t.Type, ColumnNames(table))
		}
	}
	return merged, nil
}

// newNestedField finds a field of got, inside struct column name (at any
// depth of structs), that the table's type lacks while everything else
// the two share matches: Spark's mergeSchema would add it, Quiver does
// not. It returns the field's dotted path ("s.inner.c").
func newNestedField(name string, table, got deltalog.DataType) (string, bool) {
	if table.Name != "struct" || got.Name != "struct" {
		return "", false
	}
	var added string
	for _, g := range got.Fields {
		var t *deltalog.StructField
		for i := range table.Fields {
			if table.Fields[i].Name == g.Name {
				t = &table.Fields[i]
			}
		}
		switch {
		case t == nil:
			if added == "" {
				added = name + "." + g.Name
			}
		case sameType(t.Type, g.Type):
		default:
			path, ok := newNestedField(name+"."+g.Name, t.Type, g.Type)
			if !ok {
				return "", false // a changed type, not only an added field
			}
			if added == "" {
				added = path
			}
		}
	}
	return added, added != ""
}

// nestedType is the type of the field at dotted path (newNestedField) of
// struct type t, as Spark's DDL spells primitives.
func nestedType(t deltalog.DataType, path string) string {
	parts := strings.Split(path, ".")
	for _, p := range parts[1:] {
		for _, f := range t.Fields {
			if f.Name == p {
				t = f.Type
				break
			}
		}
	}
	if t.Name == "struct" {
		return "STRUCT<…>"
	}
	return strings.ToUpper(t.String())
}

// sameType compares two Delta types ignoring field metadata (which the
// table may carry and Arrow input never does).
func sameType(a, b deltalog.DataType) bool { return typeJSON(a) == typeJSON(b) }

// typeJSON renders t without field metadata.
func typeJSON(t deltalog.DataType) string {
	b, err := json.Marshal(stripMetadata(t))
	if err != nil {
		return t.String()
	}
	return string(b)
}

func stripMetadata(t deltalog.DataType) deltalog.DataType {
	if t.Fields != nil {
		fields := make([]deltalog.StructField, len(t.Fields))
		for i, f := range t.Fields {
			fields[i] = deltalog.StructField{Name: f.Name, Type: stripMetadata(f.Type), Nullable: f.Nullable}
		}
		t.Fields = fields
	}
	for _, c := range []**deltalog.DataType{&t.Element, &t.Key, &t.Value} {
		if *c != nil {
			s := stripMetadata(**c)
			*c = &s
		}
	}
	return t
}

// ColumnNames lists the top-level column names of s, for messages.
func ColumnNames(s *deltalog.Schema) string {
	names := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

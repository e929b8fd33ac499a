package duckcheck

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Summary describes one Parquet file as DuckDB reads it.
type Summary struct {
	Rows        int64
	RowGroups   int64
	Compression []string // distinct codecs of the column chunks, sorted ("SNAPPY", "ZSTD", "UNCOMPRESSED")
	Columns     []Column // top-level columns, in file order
}

// Column summarises one top-level column.
type Column struct {
	Name string
	Type string // DuckDB's type name: BIGINT, DOUBLE, VARCHAR, DECIMAL(10,2), TIMESTAMP WITH TIME ZONE, INTEGER[], ...
	// Nulls counts the rows where the column is NULL.
	Nulls int64
	// Min and Max are the smallest and largest non-null values, typed as
	// DB.Query documents; nil for nested types (STRUCT, LIST, MAP) and for
	// an all-null column.
	Min, Max any
	// Sum is the sum of the non-null values of a numeric column: int64 for
	// integer types (a sum overflowing int64 fails the test), float64 for
	// FLOAT and DOUBLE, the exact decimal as a string for DECIMAL ("12.30");
	// nil for other types and for an all-null column.
	Sum any
}

// Column returns the column called name, failing the test if there is none.
func (s Summary) Column(t testing.TB, name string) Column {
	t.Helper()
	i := slices.IndexFunc(s.Columns, func(c Column) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("duckcheck: no column %q", name)
	}
	return s.Columns[i]
}

// FileSummary reads the Parquet file at path with read_parquet and
// parquet_metadata and summarises it: one aggregate query over the data,
// plain count/min/max/sum, so nothing depends on the file's own statistics.
func (d *DB) FileSummary(t testing.TB, path string) Summary {
	t.Helper()
	var s Summary
	for _, row := range d.Query(t, "DESCRIBE SELECT * FROM "+Parquet(path)) {
		s.Columns = append(s.Columns, Column{Name: row[0].(string), Type: row[1].(string)})
	}
	// One pass: count(*), then per column nulls, min, max, sum.
	exprs := []string{"count(*)"}
	for _, c := range s.Columns {
		col := ident(c.Name)
		exprs = append(exprs, "count(*) - count("+col+")")
		if nested(c.Type) {
			exprs = append(exprs, "NULL", "NULL")
		} else {
			exprs = append(exprs, "min("+col+")", "max("+col+")")
		}
		exprs = append(exprs, sumExpr(c.Type, col))
	}
	row := d.one(t, fmt.Sprintf("SELECT %s FROM %s", strings.Join(exprs, ", "), Parquet(path)))
	s.Rows = asInt64(t, row[0])
	for i := range s.Columns {
		c := &s.Columns[i]
		v := row[1+4*i:]
		c.Nulls, c.Min, c.Max, c.Sum = asInt64(t, v[0]), v[1], v[2], v[3]
	}
	meta := d.one(t, "SELECT count(DISTINCT row_group_id), list(DISTINCT compression) FROM parquet_metadata("+literal(path)+")")
	s.RowGroups = asInt64(t, meta[0])
	for _, codec := range asList(meta[1]) {
		s.Compression = append(s.Compression, fmt.Sprint(codec))
	}
	slices.Sort(s.Compression)
	return s
}

// sumExpr is the SQL for Column.Sum of a column of DuckDB type typ.
func sumExpr(typ, col string) string {
	switch {
	case strings.HasPrefix(typ, "DECIMAL"):
		return "sum(" + col + ")::VARCHAR"
	case typ == "FLOAT" || typ == "DOUBLE":
		return "sum(" + col + ")::DOUBLE"
	case slices.Contains(integerTypes, typ):
		return "sum(" + col + ")::BIGINT"
	default:
		return "NULL"
	}
}

var integerTypes = []string{"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "HUGEINT", "UHUGEINT"}

// nested reports whether a DuckDB type is a STRUCT, MAP or LIST/ARRAY.
func nested(typ string) bool {
	return strings.HasPrefix(typ, "STRUCT") || strings.HasPrefix(typ, "MAP") || strings.HasSuffix(typ, "]")
}

// asList converts a LIST value DuckDB returned.
func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// Package duckcheck checks Parquet files with DuckDB, a reader independent
// of Quiver's own, for tests of other packages: row counts, per-column null
// counts, min, max and sums, and any other SQL over read_parquet. It is
// test support only: no production package imports it. Every function
// takes the test and fails it (t.Fatal) on error, so callers get values.
package duckcheck

import (
	"database/sql"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" driver
)

// DB is an in-memory DuckDB database. It is safe for concurrent use.
type DB struct {
	db *sql.DB
}

// Open opens an in-memory DuckDB database, closed when the test ends.
func Open(t testing.TB) *DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatalf("duckcheck: open duckdb: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("duckcheck: close duckdb: %v", err)
		}
	})
	return &DB{db: db}
}

// Query runs query with args ($1, $2, ... or ?) and returns every row, each
// column as the duckdb-go driver scans it: int8..int64, uint8..uint64,
// *big.Int (HUGEINT), float32/float64, bool, string, []byte, time.Time
// (DATE, TIMESTAMP, TIMESTAMPTZ), duckdb.Decimal, []any (LIST),
// map[string]any (STRUCT), duckdb.Map, or nil for NULL.
func (d *DB) Query(t testing.TB, query string, args ...any) [][]any {
	t.Helper()
	rows, err := d.db.QueryContext(t.Context(), query, args...)
	if err != nil {
		t.Fatalf("duckcheck: %s: %v", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatalf("duckcheck: %s: %v", query, err)
	}
	var out [][]any
	for rows.Next() {
		row := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("duckcheck: %s: scan: %v", query, err)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("duckcheck: %s: %v", query, err)
	}
	return out
}

// Parquet returns the SQL table expression reading the Parquet file at
// path, for use in Query: "SELECT count(*) FROM " + duckcheck.Parquet(p).
func Parquet(path string) string {
	return "read_parquet(" + literal(path) + ")"
}

// ParquetRowNumbered is Parquet with the extra column file_row_number,
// each row's 0-based position in the file (what Delta deletion vectors
// and Lance row addresses count).
func ParquetRowNumbered(path string) string {
	return "read_parquet(" + literal(path) + ", file_row_number = true)"
}

// literal quotes s as an SQL string literal.
func literal(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// ident quotes s as an SQL identifier.
func ident(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// one runs a query expected to return exactly one row.
func (d *DB) one(t testing.TB, query string) []any {
	t.Helper()
	rows := d.Query(t, query)
	if len(rows) != 1 {
		t.Fatalf("duckcheck: %s: %d rows, want 1", query, len(rows))
	}
	return rows[0]
}

// asInt64 converts a count DuckDB returned.
func asInt64(t testing.TB, v any) int64 {
	t.Helper()
	switch n := v.(type) {
	case int64:
		return n
	case int32:
		return int64(n)
	case uint64:
		return int64(n)
	}
	t.Fatalf("duckcheck: count of type %T", v)
	return 0
}

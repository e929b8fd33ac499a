// Package parquetio writes Arrow record batches to Parquet files and reads
// them back.
//
// The write path ([NewWriter]) encodes pages straight from the Arrow
// buffers, one column at a time (values.go gathers, column.go encodes,
// internal/pqfile frames pages and writes the footer): no row structs, no
// value per cell, no per-row allocation; parquet-go provides the file
// format's Thrift types and the encoders that take slices. It maps Arrow
// types to the Parquet types Spark,
// delta-rs and DuckDB expect (the type table of docs/delta.md, "Types",
// after the Delta protocol's "Primitive Types") and computes per-column
// statistics ([FileStats]) from the Arrow data as batches go by, so the Delta
// layer can build its stats JSON without reading the file back.
//
// Files have version 1 data pages, 3-level LIST and MAP groups, INT64
// TIMESTAMP(MICROS), Spark's decimal layout and PLAIN or dictionary encoded
// strings and binary (never DELTA_LENGTH_BYTE_ARRAY, which Spark's
// vectorized reader refuses or misreads), so Spark, delta-rs, DuckDB and
// pyarrow read them (the tests read every type back with DuckDB and
// arrow-go's pqarrow).
//
// The read path ([ReadFile]) uses arrow-go's pqarrow; it is for Quiver's own
// Delta reader and for tests, not a hot path.
//
// This package knows nothing of Delta: it must not import writers/delta or
// its subpackages. Delta-only rules (timestamp stats truncated to
// milliseconds, 32-character string stats prefixes, which columns get stats)
// belong to the Delta layer.
package parquetio

import (
	"context"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// DefaultRowGroupRows is the row group size used when Options.RowGroupRows
// is zero.
const DefaultRowGroupRows = 131072

// Compression codec names accepted by Options.Compression.
const (
	CompressionSnappy = "snappy"
	CompressionZstd   = "zstd"
	CompressionNone   = "none"
)

// Options configure a Writer. The zero value is valid: snappy, 131072-row
// row groups, automatic dictionary encoding.
type Options struct {
	// Compression is "snappy" (also the meaning of ""), "zstd" or "none".
	Compression string
	// RowGroupRows is the number of rows per row group; 0 means
	// DefaultRowGroupRows. A row group is flushed as soon as this many rows
	// are buffered, so it also bounds the writer's memory.
	RowGroupRows int64
	// NoDictionary turns dictionary encoding off for every column. By
	// default the writer decides per leaf column from the first batch it
	// sees: dictionary-typed input, and non-boolean columns with at most
	// one distinct value per 8 among the first 4096 values, are dictionary
	// encoded; the others are written PLAIN. A dictionary that outgrows
	// 1 MiB falls back to PLAIN for the rest of its row group. Trying a
	// dictionary on every column is what makes other encoders 2-4x slower
	// (as measured when this package was written).
	NoDictionary bool
	// DeltaIntegers writes INT32 and INT64 columns (integers, dates,
	// timestamps, times) that are not dictionary encoded with
	// DELTA_BINARY_PACKED instead of PLAIN: sorted or clustered values
	// (ids, event times) pack into a few bits each, so files are smaller
	// and zstd has much less to compress. Every current reader decodes it
	// (Spark from 3.3, arrow-rs and delta-rs, pyarrow, DuckDB, Trino);
	// Spark 3.2 and older's vectorized reader refuses it, so it is not the
	// default.
	DeltaIntegers bool
}

// FileStats describe one written file. They are computed from the Arrow
// data written, not read back from the file.
type FileStats struct {
	// Rows is the number of rows in the file.
	Rows int64
	// Bytes is the exact size of the file, footer included.
	Bytes int64
	// Columns holds one entry per column in depth-first schema order: every
	// top-level column, and below each struct column one entry per child,
	// recursively. List and map columns get one entry (no children).
	Columns []ColumnStats
}

// ColumnStats are the statistics of one column (top-level or nested in
// structs).
type ColumnStats struct {
	// Path is the column's field names from the top level down, e.g.
	// ["s", "a"] for field a of struct column s.
	Path []string
	// NullCount counts rows where the value is null, including rows where
	// an enclosing struct is null.
	NullCount int64
	// HasMinMax reports whether Min and Max are set: false for struct, list
	// and map columns, for columns with only nulls, and for float columns
	// holding a NaN.
	HasMinMax bool
	// Min and Max are the smallest and largest non-null values, as:
	//   int8..int64       int64
	//   float32, float64  float64
	//   bool              bool
	//   utf8, large_utf8  string (exact, not truncated)
	//   binary, large_binary, fixed_size_binary
	//                     []byte (bytewise order)
	//   date32            time.Time (UTC midnight)
	//   timestamp         time.Time (UTC) of the value as stored, in
	//                     microseconds (nanoseconds rounded down; not
	//                     truncated to milliseconds)
	//   decimal128        json.Number, exact (e.g. "-12.340" for scale 3)
	// Dictionary columns report the type of their values. Delta wants no
	// bounds for bool and binary; dropping them is the caller's choice.
	Min, Max any
}

// ReadOptions configure ReadFile.
type ReadOptions struct {
	// Columns selects top-level columns by name; nil reads all, an empty
	// (non-nil) list none: the batches then hold the file's rows without
	// columns.
	Columns []string
	// FieldIDs, when set, holds the Parquet field id of each of Columns
	// (negative: none). In a file whose top-level columns carry field ids
	// a column with an id is the file's column of that id, whatever its
	// name (absent when none has it), as readers of Delta tables in
	// column mapping mode id resolve them; elsewhere a column is found by
	// name. A name the file lacks matches the one file column equal to
	// it under case folding, as Spark resolves them (two such columns are
	// ErrInvalid). A column found under another name reads under the name
	// in Columns.
	FieldIDs []int32
	// SkipMissing leaves out the Columns the file lacks (files written
	// before a column was added) instead of refusing them; when it lacks
	// them all, the batches hold the file's rows without columns. Such a
	// row count comes from the footer alone: the row groups' counts must
	// add up to its total, or the file is refused as corrupt.
	SkipMissing bool
	// BatchRows is the maximum rows per returned record batch; 0 means 65536.
	BatchRows int64
}

// CheckSchema reports whether every field of schema can be written, so a
// sink can refuse a stream at its first batch, and that it has at most
// 65,535 leaf columns. The error wraps writers.ErrInvalid and names the
// column and its type, or the number of columns.
func CheckSchema(schema *arrow.Schema) error { return checkSchema(schema) }

// ReadFile opens the Parquet file r of size bytes and returns a reader of
// its rows as Arrow record batches allocated from mem, with the selected
// top-level columns in file order. Types follow the Parquet logical types:
// INT(8/16/32/64) as int8..int64, STRING as utf8, other BYTE_ARRAY as
// binary, DATE as date32, TIMESTAMP as timestamp[unit] (tz "UTC" when
// isAdjustedToUTC), DECIMAL as decimal128, LIST as list, MAP as map, and
// top-level INT96 (legacy Spark) as timestamp[us, tz=UTC]. So what Writer
// was given reads back with dictionaries decoded, large_utf8 as utf8,
// large_binary and fixed_size_binary as binary, large_list as list, and
// timestamps in microseconds with zone "UTC" or none.
//
// ctx bounds the read. The caller must Release the reader; a record batch
// is valid until the next call to Next (Retain to keep one). r must stay
// readable until the reader is released. A malformed file or an unknown
// column gives an error wrapping writers.ErrInvalid; errors while reading
// come from Err.
func ReadFile(ctx context.Context, r io.ReaderAt, size int64, mem memory.Allocator, opts ReadOptions) (array.RecordReader, error) {
	return readFile(ctx, r, size, mem, opts)
}

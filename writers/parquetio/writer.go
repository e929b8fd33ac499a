package parquetio

import (
	"bytes"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"

	"github.com/quiver-ingest/quiver/writers"
)

// Writer encodes Arrow record batches into one Parquet file.
//
// A Writer is not safe for concurrent use. Close must be called once to
// finish the file. An error from Write leaves the file unusable: later
// calls return the same error (Close too, which still frees the buffers).
type Writer struct {
	out    *countingWriter
	schema *arrow.Schema
	opts   Options
	codec  compress.Codec

	roots  []*node
	leaves []*leaf
	stats  []*statNode
	slots  []slot // top-level positions of nested columns, reused

	// pw is created at the first chunk: the dictionary choice needs data.
	pw          *parquet.GenericWriter[any]
	rows        int64 // rows written, all row groups
	rowsInGroup int64
	err         error // sticky: the file is broken
	closed      bool
}

// NewWriter returns a Writer that writes a Parquet file with schema to w.
// Unsupported Arrow types and bad options give an error wrapping
// writers.ErrInvalid naming the column or option, as does a schema of more
// than 65,535 leaf columns (parquet-go's limit). Nothing is written to w
// before the first row group is flushed or Close is called.
func NewWriter(w io.Writer, schema *arrow.Schema, opts Options) (*Writer, error) {
	codec, err := codecOf(opts.Compression)
	if err != nil {
		return nil, err
	}
	if opts.RowGroupRows < 0 {
		return nil, writers.Errorf(writers.ErrInvalid, "parquetio: row group rows %d: must be positive (0 means %d)", opts.RowGroupRows, DefaultRowGroupRows)
	}
	if opts.RowGroupRows == 0 {
		opts.RowGroupRows = DefaultRowGroupRows
	}
	roots, leaves, err := buildTree(schema)
	if err != nil {
		return nil, err
	}
	return &Writer{
		out:    &countingWriter{w: w},
		schema: schema,
		opts:   opts,
		codec:  codec,
		roots:  roots,
		leaves: leaves,
		stats:  statNodes(roots),
	}, nil
}

// codecOf maps Options.Compression to a shared codec, safe for concurrent
// use: parquet-go's, or this package's zstd (zstd.go).
func codecOf(name string) (compress.Codec, error) {
	switch name {
	case "", CompressionSnappy:
		return &parquet.Snappy, nil
	case CompressionZstd:
		return &fastZstd, nil
	case CompressionNone:
		return &parquet.Uncompressed, nil
	}
	return nil, writers.Errorf(writers.ErrInvalid, "parquetio: compression %q: use %q, %q or %q", name, CompressionSnappy, CompressionZstd, CompressionNone)
}

// shredRows bounds the rows converted at once: every leaf keeps a buffer
// of parquet.Value (24 bytes each, with a pointer the collector scans)
// between calls, memory the server's budget does not see, so it must not
// grow with the batches a client sends (65,536 rows × 8 columns would be
// 12 MiB per open file). A file's first chunk is no exception: converting
// it whole cost each new file 12 MiB of such garbage, which made Delta
// appends collect more often (docs/benchmarks.md); the dictionary choice
// samples the first 4,096 non-null values of the first chunk
// (wantsDictionary), so only a column more than half null in a file's
// first 8,192 rows is judged on fewer. Buffers that outgrow it (long lists)
// are dropped after their chunk (keepScratch).
const shredRows = 8192

// Write appends rec's rows. rec is borrowed for the call; its fields must
// match the writer's schema in name, type and nullability (else
// writers.ErrInvalid). Array offsets (slices), null bitmaps and dictionary
// arrays are honoured. The arrays must be fully valid Arrow, as
// array.ValidateFull checks: the offsets of every slot, nulls included,
// within the data and non-decreasing, because the conversion reads the
// slots under nulls too; Write does not check this again (the Flight
// service validates every batch it receives). A row group is flushed to the underlying writer
// every Options.RowGroupRows rows; errors from the underlying writer are
// returned as they are.
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if w.closed {
		return writers.Errorf(writers.ErrWrongState, "parquetio: write after close: start a new file")
	}
	if w.err != nil {
		return w.err
	}
	if err := w.checkRecord(rec); err != nil {
		return err
	}
	n := int(rec.NumRows())
	for lo := 0; lo < n; {
		hi := lo + int(min(int64(n-lo), w.opts.RowGroupRows-w.rowsInGroup, shredRows))
		if err := w.writeChunk(rec, lo, hi); err != nil {
			w.err = err
			return err
		}
		lo = hi
	}
	return nil
}

// checkRecord compares fields, ignoring schema metadata.
func (w *Writer) checkRecord(rec arrow.RecordBatch) error {
	got, want := rec.Schema().Fields(), w.schema.Fields()
	if len(got) != len(want) {
		return writers.Errorf(writers.ErrInvalid, "parquetio: batch has %d columns, the file has %d: send batches of one schema per file", len(got), len(want))
	}
	for i, f := range got {
		if f.Name != want[i].Name || f.Nullable != want[i].Nullable || !arrow.TypeEqual(f.Type, want[i].Type) {
			return writers.Errorf(writers.ErrInvalid, "parquetio: batch column %d is %s, the file's is %s: send batches of one schema per file", i, f, want[i])
		}
	}
	return nil
}

// writeChunk writes rows [lo, hi) of rec, all in the current row group.
func (w *Writer) writeChunk(rec arrow.RecordBatch, lo, hi int) error {
	var err error
	for i, root := range w.roots {
		if w.slots, err = root.shred(rec.Column(i), lo, hi, w.slots); err != nil {
			return err
		}
	}
	if w.pw == nil {
		w.open()
	}
	for _, s := range w.stats {
		s.observe()
		if l := s.node.leaf; l != nil && !l.observed {
			l.stats.observe(l.kind, l.vals)
		}
	}
	columns := w.pw.ColumnWriters()
	for _, l := range w.leaves {
		if _, err := columns[l.column].WriteRowValues(l.vals); err != nil {
			return fmt.Errorf("parquetio: write column %q: %w", l.path, err)
		}
		if l.kind == parquet.ByteArray || l.kind == parquet.FixedLenByteArray {
			// Drop the pointers into the record's buffers so the
			// buffer does not keep them alive.
			clear(l.vals)
		}
	}
	for _, r := range w.roots {
		r.keepScratch(shredRows)
	}
	w.rows += int64(hi - lo)
	w.rowsInGroup += int64(hi - lo)
	if w.rowsInGroup == w.opts.RowGroupRows {
		w.rowsInGroup = 0
		if err := w.pw.Flush(); err != nil {
			return fmt.Errorf("parquetio: flush row group: %w", err)
		}
	}
	return nil
}

// open creates the parquet-go writer once the first chunk's values are
// shredded, choosing each leaf's dictionary encoding from them.
func (w *Writer) open() {
	dictionary := make([]bool, len(w.leaves))
	for i, l := range w.leaves {
		dictionary[i] = !w.opts.NoDictionary && l.wantsDictionary()
	}
	opts := []parquet.WriterOption{
		parquetSchema(w.roots, dictionary),
		parquet.Compression(w.codec),
		parquet.DictionaryMaxBytes(dictionaryMaxBytes),
		// parquet-go's default for BYTE_ARRAY is DELTA_LENGTH_BYTE_ARRAY,
		// which Spark's vectorized reader refuses (3.3 and older) or
		// garbles (SPARK-52240): PLAIN, as Spark and arrow-rs write.
		parquet.DefaultEncodingFor(parquet.ByteArray, &parquet.Plain),
		// Version 1 data pages are what Spark, pyarrow and delta-rs
		// write by default and what every reader handles.
		parquet.DataPageVersion(1),
		parquet.CreatedBy("quiver", "parquetio", "parquet-go"),
	}
	if w.opts.DeltaIntegers {
		opts = append(opts,
			parquet.DefaultEncodingFor(parquet.Int32, &parquet.DeltaBinaryPacked),
			parquet.DefaultEncodingFor(parquet.Int64, &parquet.DeltaBinaryPacked))
	}
	w.pw = parquet.NewGenericWriter[any](w.out, opts...)
}

// BytesWritten estimates the file size so far: bytes written to the
// underlying writer plus the uncompressed size of buffered rows (so it
// overestimates until the row group is flushed). Use it to roll to a new
// file at a target size.
func (w *Writer) BytesWritten() int64 {
	if w.pw == nil {
		return w.out.n
	}
	return w.pw.Size()
}

// Buffered estimates the bytes the writer holds in memory: the rows of
// the row group not flushed yet, uncompressed.
func (w *Writer) Buffered() int64 {
	if w.pw == nil {
		return 0
	}
	return max(0, w.pw.Size()-w.out.n)
}

// FlushRowGroup ends the current row group early (under memory pressure)
// and writes it out, so that Buffered drops to about zero.
func (w *Writer) FlushRowGroup() error {
	if w.err != nil || w.closed || w.rowsInGroup == 0 {
		return w.err
	}
	w.rowsInGroup = 0
	if err := w.pw.Flush(); err != nil {
		w.err = fmt.Errorf("parquetio: flush row group: %w", err)
		return w.err
	}
	return nil
}

// Close flushes buffered rows, writes the footer and returns the file's
// statistics. It does not close the underlying io.Writer. A second Close
// returns an error wrapping writers.ErrWrongState.
func (w *Writer) Close() (FileStats, error) {
	if w.closed {
		return FileStats{}, writers.Errorf(writers.ErrWrongState, "parquetio: file already closed")
	}
	w.closed = true
	if w.err != nil {
		return FileStats{}, w.err
	}
	if w.pw == nil {
		w.open() // an empty file still has a schema and a footer
	}
	if err := w.pw.Flush(); err != nil {
		return FileStats{}, fmt.Errorf("parquetio: finish file: %w", err)
	}
	// Everything Close writes now is the tail: page indexes and footer.
	var tail bytes.Buffer
	w.out.capture = &tail
	err := w.pw.Close()
	w.out.capture = nil
	if err != nil {
		return FileStats{}, fmt.Errorf("parquetio: finish file: %w", err)
	}
	footer, err := boundFooterStats(tail.Bytes())
	if err != nil {
		return FileStats{}, err
	}
	if _, err := w.out.Write(footer); err != nil {
		return FileStats{}, fmt.Errorf("parquetio: finish file: %w", err)
	}
	fs := FileStats{Rows: w.rows, Bytes: w.out.n, Columns: make([]ColumnStats, len(w.stats))}
	for i, s := range w.stats {
		fs.Columns[i] = s.columnStats()
	}
	return fs, nil
}

// countingWriter counts the bytes that reach the file; while capture is
// set, writes go there instead.
type countingWriter struct {
	w       io.Writer
	n       int64
	capture *bytes.Buffer
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.capture != nil {
		return c.capture.Write(p)
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

package parquetio

import (
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/parquet-go/parquet-go"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/parquetio/internal/pqfile"
)

// Writer encodes Arrow record batches into one Parquet file.
//
// Values go from the Arrow buffers straight into pages (column.go): PLAIN,
// dictionary or DELTA_BINARY_PACKED values, levels from the validity
// bitmaps and list offsets, statistics in the same pass; pqfile frames
// and compresses the pages and writes the footer.
//
// A Writer is not safe for concurrent use. Close must be called once to
// finish the file. An error from Write leaves the file unusable: later
// calls return the same error (Close too, which still frees the buffers).
type Writer struct {
	file   *pqfile.File
	schema *arrow.Schema
	opts   Options

	roots  []*node
	leaves []*leaf
	chunks []*pqfile.Chunk
	stats  []*statNode
	slots  []slot // top-level positions of nested columns, reused

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
	elements, paths := schemaElements(roots)
	chunks := make([]*pqfile.Chunk, len(leaves))
	for i, l := range leaves {
		l.open(paths[i], codec, opts)
		chunks[i] = l.chunk
	}
	return &Writer{
		file:   pqfile.NewFile(w, elements, columnOrders(leaves), createdBy),
		schema: schema,
		opts:   opts,
		roots:  roots,
		leaves: leaves,
		chunks: chunks,
		stats:  statNodes(roots),
	}, nil
}

// createdBy names the writer in the footer (unchanged since parquet-go
// wrote the pages: readers key workarounds on it).
const createdBy = "quiver version parquetio(build parquet-go)"

// codecOf maps Options.Compression to a shared codec, safe for concurrent
// use: parquet-go's, or this package's zstd (zstd.go).
func codecOf(name string) (pqfile.Codec, error) {
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

// pieceRows bounds the rows a leaf converts at once: its scratch (value
// positions, converted values, nested slots) is memory the server's budget
// does not see, so it must not grow with the batches a client sends. The
// dictionary choice samples the first 4,096 non-null values of a file's
// first piece (wantsDictionary), so only a column more than half null in
// a file's first 8,192 rows is judged on fewer. Buffers that outgrow it
// (long lists) are dropped after their piece (keepScratch).
const pieceRows = 8192

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
		hi := lo + int(min(int64(n-lo), w.opts.RowGroupRows-w.rowsInGroup, pieceRows))
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
	for _, s := range w.stats {
		s.observe()
	}
	for _, l := range w.leaves {
		if l.pieceNulls < 0 { // nested: pages are cut between pieces
			if err := l.flushIfFull(); err != nil {
				return err
			}
		}
		l.vals.release()
	}
	for _, r := range w.roots {
		r.keepScratch(pieceRows)
	}
	w.rows += int64(hi - lo)
	w.rowsInGroup += int64(hi - lo)
	if w.rowsInGroup == w.opts.RowGroupRows {
		return w.flushRowGroup()
	}
	return nil
}

// flushRowGroup writes the buffered row group out.
func (w *Writer) flushRowGroup() error {
	for _, l := range w.leaves {
		if err := l.finishChunk(); err != nil {
			return err
		}
	}
	if err := w.file.WriteRowGroup(w.chunks, w.rowsInGroup); err != nil {
		return fmt.Errorf("parquetio: write row group: %w", err)
	}
	for _, l := range w.leaves {
		l.startChunk()
	}
	w.rowsInGroup = 0
	return nil
}

// BytesWritten estimates the file size so far: bytes written to the
// underlying writer plus the buffered row group (compressed pages, and
// the page being filled uncompressed, so it overestimates a little). Use
// it to roll to a new file at a target size.
func (w *Writer) BytesWritten() int64 {
	return w.file.Size() + w.Buffered()
}

// Buffered estimates the bytes the writer holds in memory: the rows of
// the row group not flushed yet.
func (w *Writer) Buffered() int64 {
	var n int64
	for _, l := range w.leaves {
		n += l.buffered()
	}
	return n
}

// FlushRowGroup ends the current row group early (under memory pressure)
// and writes it out, so that Buffered drops to about zero.
func (w *Writer) FlushRowGroup() error {
	if w.err != nil || w.closed || w.rowsInGroup == 0 {
		return w.err
	}
	if err := w.flushRowGroup(); err != nil {
		w.err = err
	}
	return w.err
}

// Close flushes buffered rows, writes the page indexes and the footer and
// returns the file's statistics. It does not close the underlying
// io.Writer. A second Close returns an error wrapping
// writers.ErrWrongState.
func (w *Writer) Close() (FileStats, error) {
	if w.closed {
		return FileStats{}, writers.Errorf(writers.ErrWrongState, "parquetio: file already closed")
	}
	w.closed = true
	defer func() {
		for _, l := range w.leaves {
			l.release()
		}
	}()
	if w.err != nil {
		return FileStats{}, w.err
	}
	if w.rowsInGroup > 0 {
		if err := w.flushRowGroup(); err != nil {
			return FileStats{}, err
		}
	}
	if err := w.file.Close(); err != nil {
		return FileStats{}, fmt.Errorf("parquetio: finish file: %w", err)
	}
	fs := FileStats{Rows: w.rows, Bytes: w.file.Size(), Columns: make([]ColumnStats, len(w.stats))}
	for i, s := range w.stats {
		fs.Columns[i] = s.columnStats()
	}
	return fs, nil
}

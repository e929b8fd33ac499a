package parquetio

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/quiver-ingest/quiver/writers"
)

const defaultBatchRows = 65536

func readFile(ctx context.Context, r io.ReaderAt, size int64, mem memory.Allocator, opts ReadOptions) (array.RecordReader, error) {
	pf, err := file.NewParquetReader(io.NewSectionReader(r, 0, size), file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		return nil, writers.Errorf(writers.ErrInvalid, "parquetio: open parquet file: %w", err)
	}
	rd, err := openRecords(ctx, pf, mem, opts)
	if err != nil {
		pf.Close()
		return nil, err
	}
	return rd, nil
}

func openRecords(ctx context.Context, pf *file.Reader, mem memory.Allocator, opts ReadOptions) (array.RecordReader, error) {
	batch := opts.BatchRows
	if batch <= 0 {
		batch = defaultBatchRows
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: batch}, mem)
	if err != nil {
		return nil, writers.Errorf(writers.ErrInvalid, "parquetio: read parquet schema: %w", err)
	}
	fields, names, err := selectFields(fr, pf, opts)
	if err != nil {
		return nil, err
	}
	if len(fields) == 0 {
		// pqarrow reads every column for none: read the rows alone.
		return newRowsReader(ctx, pf, batch)
	}
	inner, err := fr.GetRecordReader(ctx, leafColumns(pf, fields), nil)
	if err != nil {
		return nil, writers.Errorf(writers.ErrInvalid, "parquetio: read parquet columns: %w", err)
	}
	rd := &recordReader{inner: inner, file: pf, mem: mem}
	rd.refs.Store(1)
	rd.schema, rd.int96 = int96AsMicros(inner.Schema(), fr, pf, fields)
	if names != nil {
		out := rd.schema.Fields()
		for i := range out {
			out[i].Name = names[i]
		}
		md := rd.schema.Metadata()
		rd.schema, rd.rebuild = arrow.NewSchema(out, &md), true
	}
	rd.rebuild = rd.rebuild || rd.int96 != nil
	return rd, nil
}

// selectFields returns the top-level field indices of opts.Columns, in
// file order (all fields for nil), and the names they are read under when
// one of them differs from the file's (else nil). A column is found by
// its field id (opts.FieldIDs) in a file whose top-level columns carry
// field ids, else by name, else by the one name equal to it under case
// folding; names the file lacks are refused unless opts.SkipMissing.
func selectFields(fr *pqarrow.FileReader, pf *file.Reader, opts ReadOptions) ([]int, []string, error) {
	if opts.Columns == nil {
		return seq(len(fr.Manifest.Fields)), nil, nil
	}
	if opts.FieldIDs != nil && len(opts.FieldIDs) != len(opts.Columns) {
		return nil, nil, writers.Errorf(writers.ErrInvalid, "parquetio: %d field ids for %d columns", len(opts.FieldIDs), len(opts.Columns))
	}
	root := pf.MetaData().Schema.Root()
	byID := false
	for i := range root.NumFields() {
		byID = byID || root.Field(i).FieldID() >= 0
	}
	as := make(map[int]string, len(opts.Columns)) // file field → name read under
	for c, name := range opts.Columns {
		i, err := findField(fr, root, name, opts.FieldIDs, c, byID)
		if err != nil {
			return nil, nil, err
		}
		if i < 0 {
			if !opts.SkipMissing {
				return nil, nil, writers.Errorf(writers.ErrInvalid, "parquetio: column %q is not in the file", name)
			}
			continue
		}
		if prev, ok := as[i]; ok && prev != name {
			return nil, nil, writers.Errorf(writers.ErrInvalid, "parquetio: columns %q and %q are both file column %q", prev, name, fr.Manifest.Fields[i].Field.Name)
		}
		as[i] = name
	}
	var out []int
	var names []string
	renamed := false
	for i, f := range fr.Manifest.Fields {
		if name, ok := as[i]; ok {
			out, names = append(out, i), append(names, name)
			renamed = renamed || name != f.Field.Name
		}
	}
	if !renamed {
		names = nil
	}
	return out, names, nil
}

// findField returns the index of the file's top-level field for column
// name (the c-th asked for), -1 when the file lacks it.
func findField(fr *pqarrow.FileReader, root *schema.GroupNode, name string, ids []int32, c int, byID bool) (int, error) {
	if ids != nil && ids[c] >= 0 && byID {
		for i := range root.NumFields() {
			if root.Field(i).FieldID() == ids[c] {
				return i, nil
			}
		}
		return -1, nil
	}
	found := -1
	for i, f := range fr.Manifest.Fields {
		if f.Field.Name == name {
			return i, nil
		}
		if strings.EqualFold(f.Field.Name, name) {
			if found >= 0 {
				return -1, writers.Errorf(writers.ErrInvalid, "parquetio: column %q is not in the file, and %q and %q both are under case folding", name, fr.Manifest.Fields[found].Field.Name, f.Field.Name)
			}
			found = i
		}
	}
	return found, nil
}

// seq returns 0, 1, …, n-1.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// leafColumns returns the Parquet leaf columns below the top-level fields.
func leafColumns(pf *file.Reader, fields []int) []int {
	want := make(map[int]bool, len(fields))
	for _, f := range fields {
		want[f] = true
	}
	descr := pf.MetaData().Schema
	var leaves []int
	for i := range descr.NumColumns() {
		if want[descr.Root().FieldIndexByField(descr.ColumnRoot(i))] {
			leaves = append(leaves, i)
		}
	}
	return leaves
}

// int96AsMicros finds top-level INT96 columns (legacy Spark timestamps,
// which pqarrow reads as timestamp[ns]) and returns the output schema
// with those as timestamp[us, UTC], and their positions.
func int96AsMicros(schema *arrow.Schema, fr *pqarrow.FileReader, pf *file.Reader, fields []int) (*arrow.Schema, []int) {
	var pos []int
	out := schema.Fields()
	for i, fi := range fields {
		sf := fr.Manifest.Fields[fi]
		if sf.ColIndex < 0 || pf.MetaData().Schema.Column(sf.ColIndex).PhysicalType() != parquet.Types.Int96 {
			continue
		}
		pos = append(pos, i)
		out[i].Type = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	}
	if pos == nil {
		return schema, nil
	}
	md := schema.Metadata()
	return arrow.NewSchema(out, &md), pos
}

// recordReader wraps pqarrow's reader: it converts INT96 columns and
// closes the file with the last Release.
type recordReader struct {
	inner  pqarrow.RecordReader
	file   *file.Reader
	mem    memory.Allocator
	schema *arrow.Schema
	int96  []int
	// rebuild makes each batch anew under schema (INT96 columns
	// converted, or columns renamed); cur is then owned.
	rebuild bool
	refs    atomic.Int64
	cur     arrow.RecordBatch
	err     error
}

var _ array.RecordReader = (*recordReader)(nil)

func (r *recordReader) Retain() { r.refs.Add(1) }

func (r *recordReader) Release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	r.releaseCurrent()
	r.inner.Release()
	r.file.Close()
}

func (r *recordReader) releaseCurrent() {
	if r.cur != nil && r.rebuild {
		r.cur.Release()
	}
	r.cur = nil
}

func (r *recordReader) Schema() *arrow.Schema { return r.schema }

func (r *recordReader) Next() bool {
	r.releaseCurrent()
	if r.err != nil || !r.inner.Next() {
		return false
	}
	rec := r.inner.RecordBatch()
	if !r.rebuild {
		r.cur = rec
		return true
	}
	cols := make([]arrow.Array, rec.NumCols())
	copy(cols, rec.Columns())
	var converted []arrow.Array
	defer func() {
		for _, c := range converted {
			c.Release()
		}
	}()
	for _, i := range r.int96 {
		c, err := nanosToMicros(r.mem, cols[i])
		if err != nil {
			r.err = err
			return false
		}
		converted = append(converted, c)
		cols[i] = c
	}
	r.cur = array.NewRecordBatch(r.schema, cols, rec.NumRows())
	return true
}

func (r *recordReader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is the deprecated name of RecordBatch.
func (r *recordReader) Record() arrow.RecordBatch { return r.cur }

func (r *recordReader) Err() error {
	if r.err != nil {
		return r.err
	}
	if err := r.inner.Err(); err != nil && err != io.EOF {
		return fmt.Errorf("parquetio: read parquet: %w", err)
	}
	return nil
}

// nanosToMicros converts a timestamp[ns] array to timestamp[us, UTC],
// rounding toward negative infinity.
func nanosToMicros(mem memory.Allocator, arr arrow.Array) (arrow.Array, error) {
	ts, ok := arr.(*array.Timestamp)
	if !ok {
		return nil, writers.Errorf(writers.ErrInvalid, "parquetio: INT96 column read as %s, want a timestamp", arr.DataType())
	}
	b := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"})
	defer b.Release()
	b.Reserve(ts.Len())
	for i, v := range ts.TimestampValues() {
		if ts.IsNull(i) {
			b.UnsafeAppendBoolToBitmap(false)
			continue
		}
		b.UnsafeAppend(arrow.Timestamp(floorDiv(int64(v), 1000)))
	}
	return b.NewArray(), nil
}

// rowsReader reads a file none of whose columns is selected (every
// selected one missing, SkipMissing): batches of its rows without
// columns, so that the caller learns how many rows it has.
type rowsReader struct {
	ctx         context.Context
	file        *file.Reader
	schema      *arrow.Schema
	left, batch int64
	cur         arrow.RecordBatch
	err         error
	refs        atomic.Int64
}

var _ array.RecordReader = (*rowsReader)(nil)

// newRowsReader counts pf's rows as its row groups do, which must agree
// with the footer's total: nothing else checks a count no column is read
// for, and a hostile one would have the caller count rows for ever.
func newRowsReader(ctx context.Context, pf *file.Reader, batch int64) (*rowsReader, error) {
	var rows int64
	for i := range pf.NumRowGroups() {
		n := pf.MetaData().RowGroup(i).NumRows()
		if n < 0 || rows+n < rows {
			return nil, writers.Errorf(writers.ErrInvalid, "parquetio: corrupt parquet file: row group %d has %d rows", i, n)
		}
		rows += n
	}
	if rows != pf.NumRows() {
		return nil, writers.Errorf(writers.ErrInvalid, "parquetio: corrupt parquet file: the footer says %d rows, its row groups hold %d", pf.NumRows(), rows)
	}
	r := &rowsReader{ctx: ctx, file: pf, schema: arrow.NewSchema(nil, nil), left: rows, batch: batch}
	r.refs.Store(1)
	return r, nil
}

func (r *rowsReader) Retain() { r.refs.Add(1) }

func (r *rowsReader) Release() {
	if r.refs.Add(-1) == 0 {
		r.file.Close()
	}
}

func (r *rowsReader) Schema() *arrow.Schema { return r.schema }

func (r *rowsReader) Next() bool {
	r.cur = nil
	if r.err == nil {
		r.err = r.ctx.Err()
	}
	if r.left <= 0 || r.err != nil {
		return false
	}
	n := min(r.left, r.batch)
	r.left -= n
	r.cur = array.NewRecordBatch(r.schema, nil, n)
	return true
}

func (r *rowsReader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is the deprecated name of RecordBatch.
func (r *rowsReader) Record() arrow.RecordBatch { return r.cur }

func (r *rowsReader) Err() error { return r.err }

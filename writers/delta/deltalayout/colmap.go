package deltalayout

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/parquetio"
)

// ColumnMap translates between the columns of a table's data files and
// the table's columns. With column mapping (name or id mode) it maps the
// logical column names to the physical names data files, statistics and
// partitionValues use: rows inside the sink always carry logical names;
// they become physical only where they meet a file (write, readFile), so
// renamed and dropped columns are resolved by physical name, never by
// display name. With type widening (delta.typeChanges on a column) it
// upcasts what it reads of files written before the change. A nil
// *ColumnMap is a table with neither: every method is then the identity.
type ColumnMap struct {
	fields []deltalog.StructField // the table's top-level fields, with metadata
	ids    bool                   // write Parquet field ids (column mapping)
	byID   bool                   // read columns by Parquet field id (mode id)
	// widened holds the Arrow type of each top-level column whose type was
	// changed (type widening), by logical name.
	widened map[string]arrow.DataType
	// hidden are file columns that are no table columns but pass as they
	// are: row tracking's materialized row id and commit version columns
	// (their configured names are physical already).
	hidden []string
}

// Row tracking's materialized column names (table properties).
var hiddenColumnProperties = []string{
	"delta.rowTracking.materializedRowIdColumnName",
	"delta.rowTracking.materializedRowCommitVersionColumnName",
}

// NewColumnMap returns the map of a table with configuration conf whose
// files follow schema (the table's, plus any columns a stream adds, with
// their mapping assigned), nil without column mapping and type changes.
func NewColumnMap(conf map[string]string, schema *deltalog.Schema) *ColumnMap {
	mode := deltalog.ColumnMappingMode(conf)
	m := &ColumnMap{fields: schema.Fields, ids: mode != "none", byID: mode == "id"}
	for _, p := range hiddenColumnProperties {
		if name := conf[p]; name != "" {
			m.hidden = append(m.hidden, name)
		}
	}
	for _, f := range schema.Fields {
		if _, ok := f.Metadata["delta.typeChanges"]; !ok {
			continue
		}
		if a, err := (&deltalog.Schema{Fields: []deltalog.StructField{f}}).ToArrow(); err == nil {
			if m.widened == nil {
				m.widened = map[string]arrow.DataType{}
			}
			m.widened[f.Name] = a.Field(0).Type
		}
	}
	if !m.ids && m.widened == nil {
		return nil
	}
	return m
}

// ColumnMapOf returns the column mapping of snap's table (nil without,
// or when its schema does not parse: CheckWritable refuses such tables).
func ColumnMapOf(snap *deltalog.Snapshot) *ColumnMap {
	schema, err := snap.Schema()
	if err != nil {
		return nil
	}
	return NewColumnMap(snap.Metadata.Configuration, schema)
}

// physical returns the physical name of top-level column name (name
// itself when it is not a table column).
func (m *ColumnMap) physical(name string) string {
	if m == nil {
		return name
	}
	for _, f := range m.fields {
		if f.Name == name {
			return f.PhysicalName()
		}
	}
	return name
}

// keyLayout identifies the physical columns that top-level columns keys
// are read from: their physical names and column ids ("" without column
// mapping, where a column's name is its physical name for good). Indexes
// of a file's keys are valid only under the layout they were read with.
func (m *ColumnMap) KeyLayout(keys []string) string {
	if m == nil {
		return ""
	}
	var b strings.Builder
	for _, k := range keys {
		f, ok := FieldBy(m.fields, k, false)
		if !ok {
			continue // not a table column: never read (checkMergeKeys)
		}
		id, _ := f.ColumnID()
		fmt.Fprintf(&b, "%q#%d,", f.PhysicalName(), id)
	}
	return b.String()
}

// physicalNames maps top-level column names to their physical names.
func (m *ColumnMap) PhysicalNames(names []string) []string {
	if m == nil || names == nil {
		return names
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = m.physical(n)
	}
	return out
}

// logicalPath maps the physical path of a (possibly nested) column in a
// file back to its logical path; nil when it is no table column.
func (m *ColumnMap) logicalPath(path []string) []string {
	if m == nil {
		return path
	}
	out := make([]string, 0, len(path))
	fields := m.fields
	for _, p := range path {
		f, ok := FieldBy(fields, p, true)
		if !ok {
			return nil
		}
		out = append(out, f.Name)
		fields = f.Type.Fields
	}
	return out
}

// toPhysical returns rec (logical names) with the physical names, and the
// column ids as Parquet field ids, at every depth. The caller releases the
// result. A column the table lacks is ErrInvalid (the schema check admits
// only table columns, so this is a bug guard).
func (m *ColumnMap) ToPhysical(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	return m.rename(rec, false)
}

// toLogical returns rec read from a file (physical names) with the
// logical names, columns written before a type change upcast to the
// table's type; columns and struct fields no table column maps to
// (dropped ones) are left out. The caller releases the result.
func (m *ColumnMap) toLogical(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	named, err := m.rename(rec, true)
	if err != nil || m == nil || m.widened == nil {
		return named, err
	}
	defer named.Release()
	return m.upcast(ctx, mem, named)
}

// upcast casts the columns of rec whose Delta type is not the table's
// (files written before a type change) to the table's type: the widening
// casts Delta allows (integers and floats to wider ones, date to
// timestamp_ntz, decimals to a higher precision) are exact. Other Arrow
// forms of the same Delta type are left alone.
func (m *ColumnMap) upcast(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	fields := slices.Clone(rec.Schema().Fields())
	cols := slices.Clone(rec.Columns())
	var casts []arrow.Array
	defer func() {
		for _, c := range casts {
			c.Release()
		}
	}()
	for i, f := range fields {
		want, ok := m.widened[f.Name]
		if !ok || sameDeltaType(f.Type, want) {
			continue
		}
		c, err := compute.CastArray(compute.WithAllocator(ctx, mem), cols[i], compute.SafeCastOptions(want))
		if err != nil {
			return nil, writers.Errorf(writers.ErrInvalid, "delta: column %q: read %s as the table's widened %s: %w", f.Name, f.Type, want, err)
		}
		casts = append(casts, c)
		fields[i].Type, cols[i] = want, c
	}
	md := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows()), nil
}

// sameDeltaType reports whether two Arrow types map to one Delta type.
func sameDeltaType(a, b arrow.DataType) bool {
	da, errA := deltalog.FromArrow(arrow.NewSchema([]arrow.Field{{Name: "c", Type: a}}, nil))
	db, errB := deltalog.FromArrow(arrow.NewSchema([]arrow.Field{{Name: "c", Type: b}}, nil))
	return errA == nil && errB == nil && sameType(da.Fields[0].Type, db.Fields[0].Type)
}

func (m *ColumnMap) rename(rec arrow.RecordBatch, fromPhysical bool) (arrow.RecordBatch, error) {
	if m == nil {
		rec.Retain()
		return rec, nil
	}
	var fields []arrow.Field
	var cols []arrow.Array
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for i, af := range rec.Schema().Fields() {
		if slices.Contains(m.hidden, af.Name) {
			fields, cols = append(fields, af), append(cols, rec.Column(i))
			rec.Column(i).Retain()
			continue
		}
		nf, d, ok, err := m.renameField(af, rec.Column(i).Data(), m.fields, fromPhysical)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		fields = append(fields, nf)
		cols = append(cols, array.MakeFromData(d))
		d.Release()
	}
	md := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows()), nil
}

// FieldBy finds the field of fields called name, logically or physically.
func FieldBy(fields []deltalog.StructField, name string, physical bool) (deltalog.StructField, bool) {
	for _, f := range fields {
		if physical && f.PhysicalName() == name || !physical && f.Name == name {
			return f, true
		}
	}
	return deltalog.StructField{}, false
}

// renameField returns field af (with data d) renamed after its Delta
// field among fields, nested fields too, with the renamed data (the
// caller releases it). ok is false for a physical field no Delta field
// maps to (a dropped column: left out); a logical field the table lacks
// is ErrInvalid (the schema check admits only table columns).
func (m *ColumnMap) renameField(af arrow.Field, d arrow.ArrayData, fields []deltalog.StructField, fromPhysical bool) (arrow.Field, arrow.ArrayData, bool, error) {
	df, ok := FieldBy(fields, af.Name, fromPhysical)
	if !ok {
		if fromPhysical {
			return arrow.Field{}, nil, false, nil
		}
		return arrow.Field{}, nil, false, writers.Errorf(writers.ErrInvalid, "delta: column %q is not in the column-mapped table", af.Name)
	}
	nd, err := m.renameData(d, df.Type, fromPhysical)
	if err != nil {
		return arrow.Field{}, nil, false, err
	}
	out := arrow.Field{Name: df.PhysicalName(), Type: nd.DataType(), Nullable: af.Nullable}
	if fromPhysical {
		out.Name = df.Name
	} else if id, ok := df.ColumnID(); ok && m.ids {
		out.Metadata = arrow.NewMetadata([]string{parquetio.FieldIDKey}, []string{strconv.FormatInt(id, 10)})
	}
	return out, nd, true, nil
}

// renameData returns d (of Delta type dt) with the struct fields inside
// it renamed: buffers are shared, nothing is copied. The caller releases
// the result.
func (m *ColumnMap) renameData(d arrow.ArrayData, dt deltalog.DataType, fromPhysical bool) (arrow.ArrayData, error) {
	var (
		t    arrow.DataType
		kids []arrow.ArrayData
	)
	defer func() {
		for _, k := range kids {
			k.Release()
		}
	}()
	child := func(c arrow.ArrayData, ct *deltalog.DataType) (arrow.ArrayData, error) {
		if ct == nil {
			c.Retain()
			return c, nil
		}
		return m.renameData(c, *ct, fromPhysical)
	}
	switch old := d.DataType().(type) {
	case *arrow.StructType:
		var fields []arrow.Field
		for i, af := range old.Fields() {
			nf, nd, ok, err := m.renameField(af, d.Children()[i], dt.Fields, fromPhysical)
			if err != nil {
				return nil, err
			}
			if ok {
				fields, kids = append(fields, nf), append(kids, nd)
			}
		}
		t = arrow.StructOf(fields...)
	case *arrow.ListType, *arrow.LargeListType:
		e, err := child(d.Children()[0], dt.Element)
		if err != nil {
			return nil, err
		}
		kids = []arrow.ArrayData{e}
		ef := old.(arrow.ListLikeType).ElemField()
		ef.Type = e.DataType()
		if _, large := old.(*arrow.LargeListType); large {
			t = arrow.LargeListOfField(ef)
		} else {
			t = arrow.ListOfField(ef)
		}
	case *arrow.MapType:
		entries := d.Children()[0]
		k, err := child(entries.Children()[0], dt.Key)
		if err != nil {
			return nil, err
		}
		defer k.Release()
		v, err := child(entries.Children()[1], dt.Value)
		if err != nil {
			return nil, err
		}
		defer v.Release()
		kf, vf := old.KeyField(), old.ItemField()
		kf.Type, vf.Type = k.DataType(), v.DataType()
		mt := arrow.MapOfFields(kf, vf)
		mt.KeysSorted = old.KeysSorted
		t = mt
		kids = []arrow.ArrayData{array.NewData(mt.Elem(), entries.Len(), entries.Buffers(),
			[]arrow.ArrayData{k, v}, entries.NullN(), entries.Offset())}
	default:
		d.Retain()
		return d, nil
	}
	return array.NewData(t, d.Len(), d.Buffers(), kids, d.NullN(), d.Offset()), nil
}

// readFile opens data file r (size bytes) as parquetio.ReadFile does, with
// opts.Columns naming logical columns (nil: every column of the table the
// file holds, and the hidden ones), and returns batches with the logical
// names: the file's columns are found by physical name (in mode id by
// Parquet field id, as Delta readers do), so renamed columns are read and
// dropped ones left out.
func (m *ColumnMap) ReadFile(ctx context.Context, r io.ReaderAt, size int64, mem memory.Allocator, opts parquetio.ReadOptions) (array.RecordReader, error) {
	if m == nil {
		return parquetio.ReadFile(ctx, r, size, mem, opts)
	}
	if opts.Columns == nil {
		for _, f := range m.fields {
			opts.Columns = append(opts.Columns, f.PhysicalName())
		}
		opts.Columns = append(opts.Columns, m.hidden...)
		opts.SkipMissing = true
	} else {
		opts.Columns = m.PhysicalNames(opts.Columns)
	}
	if m.byID {
		opts.FieldIDs = m.fieldIDs(opts.Columns)
	}
	in, err := parquetio.ReadFile(ctx, r, size, mem, opts)
	if err != nil {
		return nil, err
	}
	// The logical schema, known before the first batch: rename an empty one.
	cols := make([]arrow.Array, in.Schema().NumFields())
	for i, f := range in.Schema().Fields() {
		cols[i] = array.MakeArrayOfNull(mem, f.Type, 0)
		defer cols[i].Release()
	}
	empty := array.NewRecordBatch(in.Schema(), cols, 0)
	defer empty.Release()
	logical, err := m.toLogical(ctx, mem, empty)
	if err != nil {
		in.Release()
		return nil, err
	}
	defer logical.Release()
	out := &logicalReader{ctx: ctx, mem: mem, in: in, m: m, schema: logical.Schema()}
	out.refs.Store(1)
	return out, nil
}

// fieldIDs returns the column ids of the top-level columns of physical
// names names (-1 for a name that is no table column's: read by name).
func (m *ColumnMap) fieldIDs(names []string) []int32 {
	ids := make([]int32, len(names))
	for i, n := range names {
		ids[i] = -1
		if f, ok := FieldBy(m.fields, n, true); ok {
			if id, ok := f.ColumnID(); ok {
				ids[i] = int32(id)
			}
		}
	}
	return ids
}

// logicalReader turns the batches of a data file's reader into the
// table's columns (ColumnMap.toLogical).
type logicalReader struct {
	ctx    context.Context
	mem    memory.Allocator
	in     array.RecordReader
	m      *ColumnMap
	schema *arrow.Schema
	cur    arrow.RecordBatch
	err    error
	refs   atomic.Int64
}

func (r *logicalReader) Retain() { r.refs.Add(1) }

func (r *logicalReader) Release() {
	if r.refs.Add(-1) == 0 {
		r.release()
		r.in.Release()
	}
}

func (r *logicalReader) release() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
}

func (r *logicalReader) Schema() *arrow.Schema { return r.schema }

func (r *logicalReader) Next() bool {
	r.release()
	if r.err != nil || !r.in.Next() {
		return false
	}
	r.cur, r.err = r.m.toLogical(r.ctx, r.mem, r.in.RecordBatch())
	return r.err == nil
}

func (r *logicalReader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is RecordBatch (array.RecordReader's deprecated name).
func (r *logicalReader) Record() arrow.RecordBatch { return r.cur }

func (r *logicalReader) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.in.Err()
}

// CheckMappedColumns checks the column mapping of files (the schema of a
// descriptor's files, whose added columns were mapped after the table's
// maxColumnId was mappedAfter) against a column-mapped table: a column of
// the table must have the table's physical name at every depth, and a
// column the files add must have an id above the table's maxColumnId
// (ids of dropped columns are never reused). Anything else is
// ErrConflict (gRPC Aborted): an ALTER TABLE renamed or dropped a column
// (or dropped and added it again) since the files were written, or
// another writer added a column the files add or took its id; a replay
// writes the rows afresh under the table's mapping then.
func CheckMappedColumns(table *deltalog.Schema, maxID int64, files *deltalog.Schema, mappedAfter *int64) error {
	return mappedCheck{maxID, mappedAfter}.fields(table.Fields, files.Fields, "")
}

// mappedCheck is CheckMappedColumns' view of the table: its maxColumnId
// and the one the files' added columns were mapped after.
type mappedCheck struct {
	maxID       int64
	mappedAfter *int64
}

// fields checks the fields files of the files (at path, "" for the top
// level) against the table's fields table of that struct.
func (c mappedCheck) fields(table, files []deltalog.StructField, path string) error {
	for _, f := range files {
		name := path + f.Name
		id, hasID := f.ColumnID()
		added := c.mappedAfter != nil && hasID && id > *c.mappedAfter
		t, ok := FieldBy(table, f.Name, false)
		if !ok {
			switch {
			case !hasID || added && id <= c.maxID:
				return writers.Errorf(writers.ErrConflict, "delta: new column %q has column mapping id %d, not above the table's %s %d: another writer added columns since the files were written: roll back and replay the transaction", name, id, deltalog.ColumnMappingMaxIDKey, c.maxID)
			case id <= c.maxID: // a table column when the files were written
				return writers.Errorf(writers.ErrConflict, "delta: column %q was renamed or dropped since the files were written: roll back and replay the transaction", name)
			}
			continue
		}
		if added && t.PhysicalName() != f.PhysicalName() {
			return writers.Errorf(writers.ErrConflict, "delta: column %q, which the files add, was added meanwhile by another writer (as physical column %q, the files' is %q): roll back and replay the transaction", name, t.PhysicalName(), f.PhysicalName())
		}
		if t.PhysicalName() != f.PhysicalName() {
			return writers.Errorf(writers.ErrConflict, "delta: column %q was written as physical column %q, the table's is %q: the column was dropped or renamed since the files were written: roll back and replay the transaction", name, f.PhysicalName(), t.PhysicalName())
		}
		if err := c.types(t.Type, f.Type, name); err != nil {
			return err
		}
	}
	return nil
}

// types checks the fields inside types t (of the table) and f (of the
// files) at path: struct fields, array elements, map keys and values.
func (c mappedCheck) types(t, f deltalog.DataType, path string) error {
	if err := c.fields(t.Fields, f.Fields, path+"."); err != nil {
		return err
	}
	for _, e := range []struct {
		t, f *deltalog.DataType
		name string
	}{{t.Element, f.Element, "element"}, {t.Key, f.Key, "key"}, {t.Value, f.Value, "value"}} {
		if e.t != nil && e.f != nil {
			if err := c.types(*e.t, *e.f, path+"."+e.name); err != nil {
				return err
			}
		}
	}
	return nil
}

package deltaupsert

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/parquetio"
)

// An upsert changelog may lack nullable table columns (its client does not
// know a column another one added). Delta's MERGE with schema evolution
// (UPDATE SET *, INSERT *) keeps such a column's value in the rows it
// updates and writes null in the rows it inserts, and so does an upsert:
// mergeInto gathers the values the matched target rows hold
// (KeptColumns.gather) and fills them into the live rows before writing
// them (KeptColumns.fill). In a table that tracks rows, the matched rows'
// ids the key match found (upsertmatch.go) are kept the same way, as the
// materialized row id column (deltalayout.RowTracking).

// KeptColumns holds, for the table columns a changelog lacks, the values
// of the target rows its keys match, by key group and ordinal, and in a
// table that tracks rows those rows' ids.
type KeptColumns struct {
	groups *KeyGroups
	data   []arrow.Field            // missing data columns, with the table's types
	part   []string                 // missing partition columns
	rt     *deltalayout.RowTracking // set when the row ids are kept
	cols   *deltalayout.ColumnMap   // the table's column mapping (nil without)

	mu sync.Mutex
	// rows maps a group's key ordinals to their rows among the gathered
	// ones (-1: none).
	rows map[*KeyGroup][]int32
	// chunks holds, per data column, the gathered values of each file
	// (nil where the file lacks the column: nulls), lens their lengths.
	chunks [][]arrow.Array
	lens   []int
	// gathered counts the rows gathered; parts holds, per gathered row,
	// the partition values of part (nil without), and ids their row ids
	// (noRowID: none; nil unless rt is set).
	gathered int
	parts    [][]*string
	ids      []int64
}

// NewKeptColumns returns the collector for the table columns of snap
// that the changelog res lacks, and the row ids when snap tracks rows; nil
// when there is nothing to keep or no live row to fill. cols is the
// table's column mapping (nil without).
func NewKeptColumns(snap *deltalog.Snapshot, res *merge.Result, groups *KeyGroups, cols *deltalayout.ColumnMap) (*KeptColumns, error) {
	if res.LiveRows == 0 {
		return nil, nil
	}
	table, err := snap.Schema()
	if err != nil {
		return nil, fmt.Errorf("delta: table schema: %w", err)
	}
	k := &KeptColumns{groups: groups, rows: map[*KeyGroup][]int32{}, rt: deltalayout.RowTrackingOf(snap), cols: cols}
	var data deltalog.Schema
	for _, f := range table.Fields {
		switch {
		case res.Schema.HasField(f.Name):
		case slices.Contains(snap.Metadata.PartitionColumns, f.Name):
			k.part = append(k.part, f.Name)
		default:
			data.Fields = append(data.Fields, f)
		}
	}
	if len(data.Fields) > 0 {
		s, err := data.ToArrow()
		if err != nil {
			return nil, err
		}
		k.data = s.Fields()
	}
	if len(k.part)+len(k.data) == 0 && k.rt == nil {
		return nil, nil
	}
	k.chunks = make([][]arrow.Array, len(k.data))
	return k, nil
}

// rowIDs returns the table's materialized row tracking columns when the
// matched rows' ids are kept, nil otherwise (k nil too).
func (k *KeptColumns) RowIDs() *deltalayout.RowTracking {
	if k == nil {
		return nil
	}
	return k.rt
}

// Release frees the gathered values.
func (k *KeptColumns) Release() {
	for _, chunks := range k.chunks {
		for _, c := range chunks {
			if c != nil {
				c.Release()
			}
		}
	}
}

// gather records, for the matched rows fm of target file a (of group
// grp), a's values of the missing partition columns, their row ids (found
// by the match) and the missing data columns, which only then are read,
// at the matched rows alone, from the file reader opens.
func (k *KeptColumns) Gather(ctx context.Context, mem memory.Allocator, reader func() (io.ReaderAt, int64, error), a *deltalog.Add, grp *KeyGroup, fm *FileMatches) error {
	parts := make([]*string, len(k.part))
	for i, c := range k.cols.PhysicalNames(k.part) {
		parts[i] = a.PartitionValues[c]
	}
	if len(k.data) == 0 {
		k.add(grp, fm.ord, fm.ids, nil, parts)
		return nil
	}
	r, size, err := reader()
	if err != nil {
		return err
	}
	// A key column too, so that the batches hold the file's rows even
	// when it lacks every missing column (written before they were added).
	names := []string{k.groups.Keys.Data[0]}
	for _, f := range k.data {
		names = append(names, f.Name)
	}
	rr, err := k.cols.ReadFile(ctx, r, size, mem, parquetio.ReadOptions{Columns: names, SkipMissing: true})
	if err != nil {
		return fmt.Errorf("delta: upsert: read data file %s: %w", a.Path, err)
	}
	defer rr.Release()
	cctx := compute.WithAllocator(ctx, mem)
	pos := fm.Pos
	var first int64 // file position of the batch's first row
	var rows []int32
	for rr.Next() {
		rec := rr.RecordBatch()
		n := rec.NumRows()
		from := fm.Len() - len(pos)
		pos, rows = TakeRows(pos, first, n, rows)
		first += n
		if len(rows) == 0 {
			continue
		}
		taken, err := deltalayout.Take(cctx, mem, rec, rows)
		if err != nil {
			return err
		}
		to := from + len(rows)
		var ids []int64
		if fm.ids != nil {
			ids = fm.ids[from:to]
		}
		k.add(grp, fm.ord[from:to], ids, taken, parts)
		taken.Release()
	}
	if err := rr.Err(); err != nil {
		return fmt.Errorf("delta: upsert: read data file %s: %w", a.Path, err)
	}
	return nil
}

// add records rows of group grp, of key ordinals ords: their ids (when
// kept), their values of rec's columns (nil: none read) and the file's
// partition values parts.
func (k *KeptColumns) add(grp *KeyGroup, ords []int32, ids []int64, rec arrow.RecordBatch, parts []*string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	rows := k.rows[grp]
	if rows == nil {
		rows = make([]int32, grp.set.Len())
		for i := range rows {
			rows[i] = -1
		}
		k.rows[grp] = rows
	}
	for i, ord := range ords {
		rows[ord] = int32(k.gathered + i)
	}
	k.gathered += len(ords)
	if len(k.part) > 0 {
		for range ords {
			k.parts = append(k.parts, parts)
		}
	}
	if k.rt != nil {
		k.ids = append(k.ids, ids...)
	}
	if len(k.data) == 0 {
		return
	}
	for i, f := range k.data {
		var c arrow.Array
		if rec != nil {
			if idx := rec.Schema().FieldIndices(f.Name); len(idx) == 1 {
				c = rec.Column(idx[0])
				c.Retain()
			}
		}
		k.chunks[i] = append(k.chunks[i], c)
	}
	k.lens = append(k.lens, len(ords))
}

// Fill returns live rows rec, batch i of the changelog's, with the
// missing columns appended: the values gathered for each row's key, null
// for keys no target row held. Partition columns are appended as strings
// holding the partition values as logged, which the Partitioner takes as
// they are (the data files do not hold partition columns). The caller
// releases the result. Fill runs once every gather has returned.
func (k *KeptColumns) Fill(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch, i int) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	live := k.groups.live[i]
	grp := k.groups.groups[partTuple(nil)] // the one group when grps is nil
	rows := k.rows[grp]
	// at[row] is the live row's among the gathered ones, -1 for none.
	at := make([]int32, n)
	for row, ord := range live.ords {
		if live.grps != nil && live.grps[row] != grp {
			grp = live.grps[row]
			rows = k.rows[grp]
		}
		at[row] = -1
		if rows != nil {
			at[row] = rows[ord]
		}
	}

	fields := slices.Clone(rec.Schema().Fields())
	cols := slices.Clone(rec.Columns())
	var added []arrow.Array
	defer func() {
		for _, c := range added {
			c.Release()
		}
	}()
	add := func(f arrow.Field, c arrow.Array) {
		added = append(added, c)
		fields, cols = append(fields, f), append(cols, c)
	}
	if len(k.data) > 0 {
		idx := array.NewInt64Builder(mem)
		idx.Reserve(n)
		for _, g := range at {
			if g >= 0 {
				idx.UnsafeAppend(int64(g))
			} else {
				idx.UnsafeAppendBoolToBitmap(false)
			}
		}
		indices := idx.NewInt64Array()
		idx.Release()
		defer indices.Release()
		cctx := compute.WithAllocator(ctx, mem)
		for i, f := range k.data {
			c, err := k.column(cctx, mem, i, indices)
			if err != nil {
				return nil, fmt.Errorf("delta: upsert: column %q: %w", f.Name, err)
			}
			add(f, c)
		}
	}
	if k.rt != nil {
		b := array.NewInt64Builder(mem)
		b.Reserve(n)
		for _, g := range at {
			if g >= 0 && k.ids[g] != noRowID {
				b.UnsafeAppend(k.ids[g])
			} else {
				b.UnsafeAppendBoolToBitmap(false)
			}
		}
		add(k.rt.Fields(false)[0], b.NewInt64Array())
		b.Release()
	}
	for j, name := range k.part {
		b := array.NewStringBuilder(mem)
		for _, g := range at {
			var v *string
			if g >= 0 {
				v = k.parts[g][j]
			}
			if v == nil {
				b.AppendNull()
			} else {
				b.Append(*v)
			}
		}
		add(arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: true}, b.NewStringArray())
		b.Release()
	}
	md := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, int64(n)), nil
}

// column returns data column i at the gathered rows indices (null
// indices give nulls), in the type of the first file that held it (the
// table's when none did): files written by other engines may read back
// in another Arrow type of the same Delta type, and are cast to it.
func (k *KeptColumns) column(ctx context.Context, mem memory.Allocator, i int, indices *array.Int64) (arrow.Array, error) {
	typ := k.data[i].Type
	if j := slices.IndexFunc(k.chunks[i], func(c arrow.Array) bool { return c != nil }); j >= 0 {
		typ = k.chunks[i][j].DataType()
	}
	parts := make([]arrow.Array, len(k.chunks[i]))
	defer func() {
		for _, c := range parts {
			if c != nil {
				c.Release()
			}
		}
	}()
	for j, c := range k.chunks[i] {
		var err error
		switch {
		case c == nil:
			parts[j] = array.MakeArrayOfNull(mem, typ, k.lens[j])
		case arrow.TypeEqual(c.DataType(), typ):
			c.Retain()
			parts[j] = c
		default:
			if parts[j], err = compute.CastArray(ctx, c, compute.SafeCastOptions(typ)); err != nil {
				return nil, err
			}
		}
	}
	if len(parts) == 0 {
		return array.MakeArrayOfNull(mem, typ, indices.Len()), nil
	}
	all, err := array.Concatenate(parts, mem)
	if err != nil {
		return nil, err
	}
	defer all.Release()
	return compute.TakeArray(ctx, all, indices)
}

// TakeRows moves the file positions of pos (sorted) that fall in the batch
// of n rows starting at file position first into rows (reused), as batch
// offsets, and returns what is left of pos.
func TakeRows(pos []int64, first, n int64, rows []int32) ([]int64, []int32) {
	rows = rows[:0]
	for len(pos) > 0 && pos[0] < first+n {
		rows = append(rows, int32(pos[0]-first))
		pos = pos[1:]
	}
	return pos, rows
}

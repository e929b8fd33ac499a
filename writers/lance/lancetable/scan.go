package lancetable

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile/lanceenc"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// tombstoned is the field id of a column superseded by another file.
const tombstoned = -2

// ReadFragment reads the live rows of fragment f of d (deleted rows
// removed), in order, as records of the dataset schema allocated from mem:
// one, or several when a dictionary column's chunks need dictionaries of
// their own (see chunks.go).
func (d *Dataset) ReadFragment(ctx context.Context, b *storage.Bucket, f *Fragment, mem memory.Allocator) ([]arrow.RecordBatch, error) {
	recs, err := d.ReadColumns(ctx, b, f, nil, mem)
	if err != nil || f.Deletion == nil {
		return recs, err
	}
	defer lancefile.ReleaseRecords(recs)
	deleted, err := ReadDeletions(ctx, b, f)
	if err != nil {
		return nil, err
	}
	var out []arrow.RecordBatch
	var at int64 // the first row of rec
	for _, rec := range recs {
		live, err := dropRows(rec, at, deleted, mem)
		if err != nil {
			lancefile.ReleaseRecords(out)
			return nil, err
		}
		at += rec.NumRows()
		out = append(out, live)
	}
	return out, nil
}

// ReadColumns reads the top-level columns names (nil: every column, in
// schema order) of every physical row of fragment f of d, deleted rows
// included, so row i of the records one after the other is the row at
// offset i. Only the files holding those columns are opened. An unknown
// name is an error.
func (d *Dataset) ReadColumns(ctx context.Context, b *storage.Bucket, f *Fragment, names []string, mem memory.Allocator) ([]arrow.RecordBatch, error) {
	all, err := d.Manifest.Schema.ToArrow()
	if err != nil {
		return nil, err
	}
	top := d.Manifest.Schema.TopLevel()
	if names != nil {
		var picked []lancefile.Field
		var fields []arrow.Field
		for _, n := range names {
			i := slices.IndexFunc(top, func(fl lancefile.Field) bool { return fl.Name == n })
			if i < 0 {
				return nil, fmt.Errorf("lance: the dataset has no column %q", n)
			}
			picked = append(picked, top[i])
			fields = append(fields, all.Field(i))
		}
		top, all = picked, arrow.NewSchema(fields, nil)
	}
	cols := make([][]arrow.Array, len(top))
	defer func() {
		for _, c := range cols {
			lanceenc.ReleaseAll(c)
		}
	}()
	for _, df := range f.Files {
		colOf := make(map[int32]int)
		for i, id := range df.Fields {
			if id != tombstoned && i < len(df.ColumnIndices) {
				colOf[id] = int(df.ColumnIndices[i])
			}
		}
		sub := &lancefile.Schema{}
		var idx []int
		for i, fl := range top {
			// Format 2.1 data files list leaf fields only.
			tree := d.Manifest.Schema.Subtree(fl.ID)
			if slices.ContainsFunc(tree, func(f lancefile.Field) bool { _, ok := colOf[f.ID]; return ok }) {
				sub.Fields = append(sub.Fields, tree...)
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		recs, err := readDataFile(ctx, b, df, sub, colOf, mem)
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			lanceenc.ReleaseAll(cols[i])
			cols[i] = nil
			for _, rec := range recs {
				c := rec.Column(j)
				c.Retain()
				cols[i] = append(cols[i], c)
			}
		}
		lancefile.ReleaseRecords(recs)
	}
	for i, c := range cols {
		if c == nil {
			return nil, fmt.Errorf("lance: fragment %d has no data for column %q", f.ID, top[i].Name)
		}
	}
	chunks := cols
	cols = nil // records releases them
	return lancefile.Records(all, chunks, int64(f.PhysicalRows))
}

func readDataFile(ctx context.Context, b *storage.Bucket, df DataFile, s *lancefile.Schema, colOf map[int32]int, mem memory.Allocator) ([]arrow.RecordBatch, error) {
	r, size, err := b.OpenReader(ctx, DataKey(df.Path))
	if err != nil {
		return nil, fmt.Errorf("lance: open data file %s: %w", df.Path, err)
	}
	defer r.Close()
	fr, err := lancefile.OpenFile(r, size)
	if err != nil {
		return nil, fmt.Errorf("%w (data file %s)", err, df.Path)
	}
	return fr.ReadFields(mem, s, colOf)
}

// ReadDeletions returns the deleted row offsets of fragment f. A corrupt
// deletion file is an error wrapping writers.ErrInvalid naming it; the
// offsets returned are all below f.PhysicalRows.
func ReadDeletions(ctx context.Context, b *storage.Bucket, f *Fragment) ([]uint32, error) {
	if f.Deletion == nil {
		return nil, nil
	}
	key := f.Deletion.Path(f.ID)
	raw, err := b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("lance: read deletion file of fragment %d: %w", f.ID, err)
	}
	var offs []uint32
	if f.Deletion.FileType == DeletionBitmap {
		offs, err = DecodeDeletionBitmap(raw, f.PhysicalRows)
	} else {
		offs, err = DecodeDeletionArrow(raw, f.PhysicalRows)
	}
	if err != nil {
		return nil, fmt.Errorf("%w (deletion file %s)", err, key)
	}
	return offs, nil
}

// dropRows returns rec, the rows of the fragment from offset at, without
// those at offsets deleted.
func dropRows(rec arrow.RecordBatch, at int64, deleted []uint32, mem memory.Allocator) (arrow.RecordBatch, error) {
	gone := make(map[uint32]bool, len(deleted))
	for _, o := range deleted {
		if int64(o) >= at && int64(o) < at+rec.NumRows() {
			gone[uint32(int64(o)-at)] = true
		}
	}
	// Live rows as [start, end) ranges, sliced and concatenated per column.
	var ranges [][2]int64
	for i := int64(0); i < rec.NumRows(); i++ {
		if gone[uint32(i)] {
			continue
		}
		if n := len(ranges); n > 0 && ranges[n-1][1] == i {
			ranges[n-1][1]++
		} else {
			ranges = append(ranges, [2]int64{i, i + 1})
		}
	}
	var rows int64
	cols := make([]arrow.Array, rec.NumCols())
	for c := range cols {
		var parts []arrow.Array
		for _, r := range ranges {
			parts = append(parts, array.NewSlice(rec.Column(c), r[0], r[1]))
		}
		var err error
		if len(parts) == 0 {
			cols[c] = array.MakeArrayOfNull(mem, rec.Column(c).DataType(), 0)
		} else {
			cols[c], err = array.Concatenate(parts, mem)
		}
		lanceenc.ReleaseAll(parts)
		if err != nil {
			lanceenc.ReleaseAll(cols[:c])
			return nil, err
		}
		rows = int64(cols[c].Len())
	}
	defer lanceenc.ReleaseAll(cols)
	return array.NewRecordBatch(rec.Schema(), cols, rows), nil
}

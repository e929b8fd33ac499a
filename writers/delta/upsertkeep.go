package delta

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
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/parquetio"
)

// An upsert changelog may lack nullable table columns (its client does not
// know a column another one added). Delta's MERGE with schema evolution
// (UPDATE SET *, INSERT *) keeps such a column's value in the rows it
// updates and writes null in the rows it inserts, and so does an upsert:
// mergeInto gathers the values the matched target rows hold
// (keptColumns.gather) and fills them into the live rows before writing
// them (keptColumns.fill). In a table that tracks rows, the matched rows'
// ids are kept the same way, as the materialized row id column (rowids.go).

// keptColumns holds, for the table columns a changelog lacks, the values
// of the target rows its keys match, by key.
type keptColumns struct {
	keys keyColumns
	src  *merge.KeyEncoder // the source's, for SameEncoding
	data []arrow.Field     // missing data columns, with the table's types
	part []string          // missing partition columns
	rt   *rowTracking      // set when the row ids are kept (last of data)
	cols *columnMap        // the table's column mapping (nil without)

	mu sync.Mutex
	// rows maps a partition key tuple and encoded data key to its row
	// among the gathered ones.
	rows map[string]int
	// chunks holds, per data column, the gathered values of each file
	// (nil where the file lacks the column: nulls), lens their lengths.
	chunks [][]arrow.Array
	lens   []int
	// parts holds, per gathered row, the partition values of part.
	parts [][]*string
}

// newKeptColumns returns the collector for the table columns of snap
// that the changelog res lacks, and the row ids when snap tracks rows; nil
// when there is nothing to keep or no live row to fill. cols is the
// table's column mapping (nil without).
func newKeptColumns(snap *deltalog.Snapshot, res *merge.Result, groups *keyGroups, cols *columnMap) (*keptColumns, error) {
	if res.LiveRows == 0 {
		return nil, nil
	}
	table, err := snap.Schema()
	if err != nil {
		return nil, fmt.Errorf("delta: table schema: %w", err)
	}
	k := &keptColumns{keys: groups.keys, src: groups.enc, rows: map[string]int{}, rt: rowTrackingOf(snap), cols: cols}
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
	if k.rt != nil {
		k.data = append(k.data, k.rt.fields(false)...)
	}
	if len(k.part)+len(k.data) == 0 {
		return nil, nil
	}
	k.chunks = make([][]arrow.Array, len(k.data))
	return k, nil
}

// release frees the gathered values.
func (k *keptColumns) release() {
	for _, chunks := range k.chunks {
		for _, c := range chunks {
			if c != nil {
				c.Release()
			}
		}
	}
}

// gather reads the missing data columns of target file a (r, size) at the
// matched rows (ascending positions) and records them, and a's values of
// the missing partition columns, under each row's key.
func (k *keptColumns) gather(ctx context.Context, mem memory.Allocator, r io.ReaderAt, size int64, a *deltalog.Add, matched []int64) error {
	names := slices.Clone(k.keys.data)
	for _, f := range k.data {
		names = append(names, f.Name)
	}
	rr, err := k.cols.readFile(ctx, r, size, mem, parquetio.ReadOptions{Columns: names, SkipMissing: true})
	if err != nil {
		return fmt.Errorf("delta: upsert: read data file %s: %w", a.Path, err)
	}
	defer rr.Release()
	enc, err := merge.NewKeyEncoder(rr.Schema(), k.keys.data)
	if err == nil {
		err = k.src.SameEncoding(enc)
	}
	if err != nil {
		return fmt.Errorf("delta: upsert: data file %s: %w", a.Path, err)
	}
	partKey := make([]*string, len(k.keys.part))
	for i, c := range k.cols.physicalNames(k.keys.part) {
		if v := a.PartitionValues[c]; v != nil && *v != "" {
			partKey[i] = v
		}
	}
	tuple := partTuple(partKey)
	parts := make([]*string, len(k.part))
	for i, c := range k.cols.physicalNames(k.part) {
		parts[i] = a.PartitionValues[c]
	}
	cctx := compute.WithAllocator(ctx, mem)
	var first int64 // file position of the batch's first row
	var rows []int32
	for rr.Next() {
		rec := rr.RecordBatch()
		n := rec.NumRows()
		matched, rows = takeRows(matched, first, n, rows)
		first += n
		if len(rows) == 0 {
			continue
		}
		taken, err := take(cctx, mem, rec, rows)
		if err != nil {
			return err
		}
		if k.rt != nil {
			withIDs, err := k.rt.materialize(mem, taken, a, first-n, rows, false)
			taken.Release()
			if err != nil {
				return err
			}
			taken = withIDs
		}
		err = k.add(enc, taken, tuple, parts)
		taken.Release()
		if err != nil {
			return fmt.Errorf("delta: upsert: data file %s: %w", a.Path, err)
		}
	}
	if err := rr.Err(); err != nil {
		return fmt.Errorf("delta: upsert: read data file %s: %w", a.Path, err)
	}
	return nil
}

// add records the rows of rec (key and missing data columns of one file)
// under tuple, with the file's partition values parts.
func (k *keptColumns) add(enc *merge.KeyEncoder, rec arrow.RecordBatch, tuple string, parts []*string) error {
	if err := enc.EncodeColumns(namedColumns(rec, k.keys.data), int(rec.NumRows())); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	base := len(k.parts)
	for i := range enc.Len() {
		k.rows[tuple+string(enc.Key(i))] = base + i
		k.parts = append(k.parts, parts)
	}
	for i, f := range k.data {
		var c arrow.Array
		if idx := rec.Schema().FieldIndices(f.Name); len(idx) == 1 {
			c = rec.Column(idx[0])
			c.Retain()
		}
		k.chunks[i] = append(k.chunks[i], c)
	}
	k.lens = append(k.lens, int(rec.NumRows()))
	return nil
}

// fill returns live rows rec with the missing columns appended: the
// values gathered for each row's key, null for keys no target row held.
// Partition columns are appended as strings holding the partition values
// as logged, which the partitioner takes as they are (the data files do
// not hold partition columns). The caller releases the result. fill runs
// once every gather has returned.
func (k *keptColumns) fill(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	enc, err := merge.NewKeyEncoder(rec.Schema(), k.keys.data)
	if err != nil {
		return nil, err
	}
	if err := enc.EncodeColumns(namedColumns(rec, k.keys.data), n); err != nil {
		return nil, err
	}
	partCols := namedColumns(rec, k.keys.part)
	partKey := make([]*string, len(partCols))
	idx := array.NewInt64Builder(mem)
	defer idx.Release()
	for row := range n {
		for i, col := range partCols {
			if partKey[i], err = partitionValue(col, row); err != nil {
				return nil, err
			}
		}
		if g, ok := k.rows[partTuple(partKey)+string(enc.Key(row))]; ok {
			idx.Append(int64(g))
		} else {
			idx.AppendNull()
		}
	}
	indices := idx.NewInt64Array()
	defer indices.Release()

	fields := slices.Clone(rec.Schema().Fields())
	cols := slices.Clone(rec.Columns())
	var added []arrow.Array
	defer func() {
		for _, c := range added {
			c.Release()
		}
	}()
	cctx := compute.WithAllocator(ctx, mem)
	for i, f := range k.data {
		c, err := k.column(cctx, mem, i, indices)
		if err != nil {
			return nil, fmt.Errorf("delta: upsert: column %q: %w", f.Name, err)
		}
		added = append(added, c)
		fields, cols = append(fields, f), append(cols, c)
	}
	for j, name := range k.part {
		b := array.NewStringBuilder(mem)
		for row := range n {
			var v *string
			if indices.IsValid(row) {
				v = k.parts[indices.Value(row)][j]
			}
			if v == nil {
				b.AppendNull()
			} else {
				b.Append(*v)
			}
		}
		c := b.NewStringArray()
		b.Release()
		added = append(added, c)
		fields = append(fields, arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: true})
		cols = append(cols, c)
	}
	md := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, int64(n)), nil
}

// column returns data column i at the gathered rows indices (null
// indices give nulls), in the type of the first file that held it (the
// table's when none did): files written by other engines may read back
// in another Arrow type of the same Delta type, and are cast to it.
func (k *keptColumns) column(ctx context.Context, mem memory.Allocator, i int, indices *array.Int64) (arrow.Array, error) {
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

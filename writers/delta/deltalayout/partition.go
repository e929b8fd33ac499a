package deltalayout

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// Part is the rows of one batch that belong to one partition.
type Part struct {
	Dir    string             // Hive-style directory with a trailing '/', escaped for storage ("" unpartitioned)
	Values map[string]*string // add.partitionValues
	rows   []int32            // row indexes in the batch
}

// Partitioner splits batches by the values of the partition columns.
type Partitioner struct {
	Cols []string // partition columns, table order
}

// Split groups rec's rows by partition. It returns the record to write per
// partition (partition columns removed), owned by the caller, who releases
// each; partition values and directories use the physical names of cols
// (the table's column mapping, nil without). Rows are grouped column-wise: the partition key of every row is
// computed first, then each partition's columns are gathered with one
// compute.Take per column. An unpartitioned table, or a batch whose rows
// all share one partition, costs no copy.
func (p *Partitioner) Split(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch, cols *ColumnMap) ([]Part, []arrow.RecordBatch, error) {
	schema := rec.Schema()
	keyCols := make([]arrow.Array, len(p.Cols))
	for i, name := range p.Cols {
		idx := schema.FieldIndices(name)
		if len(idx) != 1 {
			return nil, nil, writers.Errorf(writers.ErrInvalid, "delta: partition column %q is missing from the batch: send it", name)
		}
		keyCols[i] = rec.Column(idx[0])
	}
	data := DropColumns(rec, p.Cols)
	defer data.Release()
	if len(p.Cols) == 0 {
		data.Retain()
		return []Part{{}}, []arrow.RecordBatch{data}, nil
	}

	parts, err := groupRows(keyCols, p.Cols, cols.PhysicalNames(p.Cols), int(rec.NumRows()))
	if err != nil {
		return nil, nil, err
	}
	if len(parts) == 1 {
		data.Retain()
		return parts, []arrow.RecordBatch{data}, nil
	}
	recs := make([]arrow.RecordBatch, 0, len(parts))
	release := func() {
		for _, r := range recs {
			r.Release()
		}
	}
	cctx := compute.WithAllocator(ctx, mem)
	for _, pt := range parts {
		r, err := Take(cctx, mem, data, pt.rows)
		if err != nil {
			release()
			return nil, nil, err
		}
		recs = append(recs, r)
	}
	return parts, recs, nil
}

// groupRows computes every row's partition and returns the partitions in
// order of first appearance, with values keyed by keys (the physical
// names of the columns called names).
func groupRows(keyCols []arrow.Array, names, keys []string, n int) ([]Part, error) {
	var (
		parts []Part
		index = make(map[string]int)
		vals  = make([]*string, len(keyCols))
		key   strings.Builder
	)
	for row := range n {
		key.Reset()
		for i, col := range keyCols {
			v, err := PartitionValue(col, row)
			if err != nil {
				return nil, fmt.Errorf("delta: partition column %q: %w", names[i], err)
			}
			vals[i] = v
			if v == nil {
				key.WriteByte(0)
			} else {
				key.WriteByte(1)
				key.WriteString(*v)
			}
			key.WriteByte(0xff)
		}
		g, ok := index[key.String()]
		if !ok {
			g = len(parts)
			index[key.String()] = g
			values := make(map[string]*string, len(keys))
			for i, k := range keys {
				values[k] = vals[i]
			}
			parts = append(parts, Part{Dir: PartitionDir(keys, values), Values: values})
		}
		parts[g].rows = append(parts[g].rows, int32(row))
	}
	return parts, nil
}

// Take gathers rows of rec into a new record.
func Take(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch, rows []int32) (arrow.RecordBatch, error) {
	ib := array.NewInt32Builder(mem)
	ib.AppendValues(rows, nil)
	idx := ib.NewInt32Array()
	ib.Release()
	defer idx.Release()
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		c, err := compute.TakeArray(ctx, rec.Column(i), idx)
		if err != nil {
			return nil, fmt.Errorf("delta: split batch by partition: column %q: %w", rec.Schema().Field(i).Name, err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(len(rows))), nil
}

// DropColumns returns rec without the named columns (no copy).
func DropColumns(rec arrow.RecordBatch, names []string) arrow.RecordBatch {
	if len(names) == 0 {
		rec.Retain()
		return rec
	}
	var cols []arrow.Array
	for i, f := range rec.Schema().Fields() {
		if !slices.Contains(names, f.Name) {
			cols = append(cols, rec.Column(i))
		}
	}
	return array.NewRecordBatch(DropFields(rec.Schema(), names), cols, rec.NumRows())
}

// DropFields returns s without the named fields.
func DropFields(s *arrow.Schema, names []string) *arrow.Schema {
	var fields []arrow.Field
	for _, f := range s.Fields() {
		if !slices.Contains(names, f.Name) {
			fields = append(fields, f)
		}
	}
	md := s.Metadata()
	return arrow.NewSchema(fields, &md)
}

// PartitionValue serializes row i of a partition column for
// add.partitionValues, per the protocol's rules
// (FormatPartitionValue). Null, the empty string and the string
// "__HIVE_DEFAULT_PARTITION__" are all nil (null), as Spark and delta-rs
// write them: all three live in the directory __HIVE_DEFAULT_PARTITION__,
// from which both writers read their partition value back as null
// (docs/delta.md, "Partition values"). Dictionary columns give their
// value.
func PartitionValue(col arrow.Array, i int) (*string, error) {
	if col.IsNull(i) {
		return nil, nil
	}
	var v any
	switch a := col.(type) {
	case *array.Dictionary:
		return PartitionValue(a.Dictionary(), a.GetValueIndex(i))
	case *array.String:
		v = a.Value(i)
	case *array.LargeString:
		v = a.Value(i)
	case *array.Int8:
		v = a.Value(i)
	case *array.Int16:
		v = a.Value(i)
	case *array.Int32:
		v = a.Value(i)
	case *array.Int64:
		v = a.Value(i)
	case *array.Float32:
		v = a.Value(i)
	case *array.Float64:
		v = a.Value(i)
	case *array.Boolean:
		v = a.Value(i)
	case *array.Date32:
		v = Date(a.Value(i).ToTime())
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType)
		t := a.Value(i).ToTime(unit.Unit)
		if unit.TimeZone == "" {
			v = TimestampNTZ(t)
		} else {
			v = t
		}
	case *array.Decimal128:
		v = Decimal(a.Value(i).ToString(a.DataType().(*arrow.Decimal128Type).Scale))
	default:
		return nil, writers.Errorf(writers.ErrInvalid, "delta: partition column type %s is not supported: partition by a string, number, boolean, date, timestamp or decimal column", col.DataType())
	}
	s, err := FormatPartitionValue(v)
	if s != nil && (*s == "" || *s == HiveDefaultPartition) {
		return nil, err
	}
	return s, err
}

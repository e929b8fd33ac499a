package deltaupsert

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/parquetio"
)

// StoredKeys returns rec with its timestamp merge-key columns in
// microseconds, the unit data files store (parquetio scales seconds and
// milliseconds and floors nanoseconds), so that an upsert collapses and
// matches keys as they are stored: the same instant sent in milliseconds
// must replace the row a microsecond file holds, and two nanosecond keys
// within one microsecond are one stored key. It returns rec itself,
// retained, when no key column needs it; the caller releases the result.
func StoredKeys(mem memory.Allocator, rec arrow.RecordBatch, keys []string) arrow.RecordBatch {
	var (
		fields []arrow.Field
		cols   []arrow.Array
	)
	for _, k := range keys {
		idx := rec.Schema().FieldIndices(k)
		if len(idx) != 1 {
			continue // the collapse reports a missing key column
		}
		ts, ok := rec.Column(idx[0]).(*array.Timestamp)
		if !ok || ts.DataType().(*arrow.TimestampType).Unit == arrow.Microsecond {
			continue
		}
		if fields == nil {
			fields, cols = rec.Schema().Fields(), rec.Columns()
			cols = append([]arrow.Array(nil), cols...)
		}
		f := &fields[idx[0]]
		f.Type = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: f.Type.(*arrow.TimestampType).TimeZone}
		cols[idx[0]] = micros(mem, ts, f.Type)
	}
	if fields == nil {
		rec.Retain()
		return rec
	}
	md := rec.Schema().Metadata()
	out := array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows())
	for i, c := range cols {
		if c != rec.Column(i) {
			c.Release() // out holds its own reference
		}
	}
	return out
}

// micros converts ts to microseconds of type typ, as parquetio stores it
// (parquetio.TimestampMicros).
func micros(mem memory.Allocator, ts *array.Timestamp, typ arrow.DataType) arrow.Array {
	b := array.NewTimestampBuilder(mem, typ.(*arrow.TimestampType))
	defer b.Release()
	b.Reserve(ts.Len())
	unit := ts.DataType().(*arrow.TimestampType).Unit
	for i, v := range ts.TimestampValues() {
		if ts.IsNull(i) {
			b.UnsafeAppendBoolToBitmap(false)
			continue
		}
		b.UnsafeAppend(arrow.Timestamp(parquetio.TimestampMicros(int64(v), unit)))
	}
	return b.NewArray()
}

package ipccheck

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Validate checks every column of rec in full (offsets within bounds and
// non-decreasing, lengths, null counts, children, dictionary indices): the
// IPC reader checks only what it needs to build the arrays, and sinks
// trust them (a negative string offset panics a Parquet encoder, or lands
// in a Lance file no reader can open).
func Validate(rec arrow.RecordBatch) error {
	for i, col := range rec.Columns() {
		if int64(col.Len()) != rec.NumRows() {
			return fmt.Errorf("column %q has %d rows, the batch %d", rec.ColumnName(i), col.Len(), rec.NumRows())
		}
		if err := ValidateColumn(col); err != nil {
			return fmt.Errorf("column %q: %w", rec.ColumnName(i), err)
		}
	}
	return nil
}

// ValidateColumn validates col in full. arrow-go's validator itself panics
// on some malformed arrays (an offsets buffer shorter than it checked):
// such a panic means the column is malformed.
func ValidateColumn(col arrow.Array) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("malformed array (validating it panicked: %v)", v)
		}
	}()
	if ok, err := validateStrings(col); ok {
		return err
	}
	data := withNullBuffers(col.Data())
	defer data.Release()
	arr := array.MakeFromData(data)
	defer arr.Release()
	return array.ValidateFull(arr)
}

// withNullBuffers returns d (retained) with the one nil buffer arrow-go's
// validator expects of null-typed arrays, which its IPC reader leaves out,
// added at every level.
func withNullBuffers(d arrow.ArrayData) arrow.ArrayData {
	kids := make([]arrow.ArrayData, len(d.Children()))
	changed := false
	for i, k := range d.Children() {
		kids[i] = withNullBuffers(k)
		changed = changed || kids[i] != k
	}
	defer func() {
		for _, k := range kids {
			k.Release()
		}
	}()
	bufs := d.Buffers()
	if d.DataType().ID() == arrow.NULL && len(bufs) == 0 {
		bufs, changed = []*memory.Buffer{nil}, true
	}
	if !changed {
		d.Retain()
		return d
	}
	if d.DataType().ID() == arrow.DICTIONARY {
		return array.NewDataWithDictionary(d.DataType(), d.Len(), bufs, d.NullN(), d.Offset(), d.Dictionary().(*array.Data))
	}
	return array.NewData(d.DataType(), d.Len(), bufs, kids, d.NullN(), d.Offset())
}

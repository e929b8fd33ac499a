package pqfile

import (
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// magic opens and closes every Parquet file.
const magic = "PAR1"

// formatVersion is the footer's version: 2, as parquet-go, arrow-go and
// Arrow C++ write for files with the page index and logical types.
const formatVersion = 2

// File writes one Parquet file: row groups as they are complete, then the
// page indexes and the footer at Close. Nothing reaches the underlying
// writer before the first row group or Close.
type File struct {
	out       countingWriter
	schema    []format.SchemaElement
	orders    []format.ColumnOrder
	createdBy string

	rowGroups []format.RowGroup
	indexes   [][]*format.ColumnIndex
	offsets   [][]format.OffsetIndex
	rows      int64
}

// NewFile returns a File writing to w with the given schema (the flattened
// schema elements, root first) and one column order per leaf.
func NewFile(w io.Writer, schema []format.SchemaElement, orders []format.ColumnOrder, createdBy string) *File {
	return &File{out: countingWriter{w: w}, schema: schema, orders: orders, createdBy: createdBy}
}

// Size is the number of bytes written so far.
func (f *File) Size() int64 { return f.out.n }

func (f *File) start() error {
	if f.out.n == 0 {
		return f.out.write([]byte(magic))
	}
	return nil
}

// WriteRowGroup writes the chunks, one per leaf column in schema order, as
// a row group of rows rows, and resets them for the next one.
func (f *File) WriteRowGroup(chunks []*Chunk, rows int64) error {
	if err := f.start(); err != nil {
		return err
	}
	rg := format.RowGroup{NumRows: rows, FileOffset: f.out.n, Ordinal: int16(len(f.rowGroups))}
	indexes := make([]*format.ColumnIndex, len(chunks))
	offsets := make([]format.OffsetIndex, len(chunks))
	for i, c := range chunks {
		cc, index, off, err := c.write(&f.out)
		if err != nil {
			return err
		}
		rg.Columns = append(rg.Columns, cc)
		rg.TotalByteSize += cc.MetaData.TotalUncompressedSize
		rg.TotalCompressedSize += cc.MetaData.TotalCompressedSize
		indexes[i], offsets[i] = index, off
		c.reset()
	}
	f.rowGroups = append(f.rowGroups, rg)
	f.indexes = append(f.indexes, indexes)
	f.offsets = append(f.offsets, offsets)
	f.rows += rows
	return nil
}

// Close writes the column indexes, the offset indexes and the footer. It
// does not close the underlying writer.
func (f *File) Close() error {
	if err := f.start(); err != nil {
		return err
	}
	// Column indexes first, then offset indexes, as parquet-mr and
	// parquet-go lay them out.
	if err := f.writeIndexes(func(i, j int) (any, *int64, *int32) {
		cc := &f.rowGroups[i].Columns[j]
		if f.indexes[i][j] == nil {
			return nil, nil, nil
		}
		return f.indexes[i][j], &cc.ColumnIndexOffset, &cc.ColumnIndexLength
	}); err != nil {
		return err
	}
	if err := f.writeIndexes(func(i, j int) (any, *int64, *int32) {
		cc := &f.rowGroups[i].Columns[j]
		return &f.offsets[i][j], &cc.OffsetIndexOffset, &cc.OffsetIndexLength
	}); err != nil {
		return err
	}
	meta := format.FileMetaData{
		Version:      formatVersion,
		Schema:       f.schema,
		NumRows:      f.rows,
		RowGroups:    f.rowGroups,
		CreatedBy:    f.createdBy,
		ColumnOrders: f.orders,
	}
	b, err := thrift.Marshal(new(thrift.CompactProtocol), &meta)
	if err != nil {
		return fmt.Errorf("pqfile: encode the footer: %w", err)
	}
	return f.out.write(b, le32(nil, len(b)), []byte(magic))
}

// writeIndexes writes one page index per column chunk, as index(i, j)
// gives it for row group i, column j (nil: none), and records where it
// went in the chunk's offset and length fields index also returns.
func (f *File) writeIndexes(index func(i, j int) (any, *int64, *int32)) error {
	for i := range f.rowGroups {
		for j := range f.rowGroups[i].Columns {
			v, offset, length := index(i, j)
			if v == nil {
				continue
			}
			b, err := thrift.Marshal(new(thrift.CompactProtocol), v)
			if err != nil {
				return fmt.Errorf("pqfile: encode the page index: %w", err)
			}
			*offset, *length = f.out.n, int32(len(b))
			if err := f.out.write(b); err != nil {
				return err
			}
		}
	}
	return nil
}

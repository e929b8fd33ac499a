package lancefile

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile/lanceenc"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// Blob pages (format 2.1, "blob v1"): a binary column whose field
// metadata says lance-encoding:blob keeps its values out of line,
// elsewhere in the data file; the page holds one description per value,
// (position, size) packed in an inner layout. Size 0 is an empty value at
// position 0 and a null one elsewhere (the position is then its
// definition level). Quiver reads top-level blob columns (no lists).

// readBlobPage reads the n values of blob page l as type dt (binary or
// large binary).
func (f *FileReader) readBlobPage(mem memory.Allocator, bud *lanceenc.Budget, dt arrow.DataType, l *encodings21pb.BlobLayout, bufs [][]byte, n uint64) (arrow.Array, error) {
	if len(l.GetLayers()) != 1 || l.Layers[0] != encodings21pb.RepDefLayer_REPDEF_ALL_VALID_ITEM && l.Layers[0] != encodings21pb.RepDefLayer_REPDEF_NULLABLE_ITEM {
		return nil, writers.Errorf(writers.ErrInvalid, "lance: blob page of levels %v: blobs inside lists or structs are not supported", l.GetLayers())
	}
	if dt.ID() != arrow.BINARY && dt.ID() != arrow.LARGE_BINARY {
		return nil, fmt.Errorf("blob page of a %s column", dt)
	}
	inner, err := lanceenc.DecodePage(bud, l.GetInnerLayout(), bufs, n)
	if err != nil {
		return nil, fmt.Errorf("blob descriptions: %w", err)
	}
	descType := &arrow.FixedSizeBinaryType{ByteWidth: 16}
	descs, err := lanceenc.Assemble(mem, bud, descType, inner, n)
	if err != nil {
		return nil, fmt.Errorf("blob descriptions: %w", err)
	}
	defer descs.Release()
	if descs.NullN() > 0 || uint64(descs.Len()) != n {
		return nil, fmt.Errorf("blob page of %d values with %d descriptions (%d null)", n, descs.Len(), descs.NullN())
	}
	d := descs.(*array.FixedSizeBinary)
	var total uint64
	for i := range d.Len() {
		pos, size := blobDesc(d.Value(i))
		if !Within(pos, size, f.size) {
			return nil, fmt.Errorf("blob value %d of %d bytes at %d outside the file of %d", i, size, pos, f.size)
		}
		if total += size; total < size {
			return nil, fmt.Errorf("blob page of more than 2^64 bytes")
		}
	}
	if dt.ID() == arrow.BINARY && total > math.MaxInt32 {
		return nil, fmt.Errorf("blob page of %d bytes does not fit 32-bit offsets (a binary column)", total)
	}
	// Descriptions may point at the same bytes: what they read is charged
	// as decoded data (bounded per byte of the file).
	if err := bud.SpendDecoded(total); err != nil {
		return nil, err
	}
	data, offs := make([]byte, total), make([]int64, d.Len()+1)
	valid := make([]byte, bitutil.BytesForBits(int64(d.Len())))
	nulls := 0
	for i := range d.Len() {
		pos, size := blobDesc(d.Value(i))
		at := offs[i]
		offs[i+1] = at + int64(size)
		switch {
		case size == 0 && pos != 0:
			nulls++
			continue
		case size > 0:
			if _, err := f.r.ReadAt(data[at:offs[i+1]], int64(pos)); err != nil {
				return nil, fmt.Errorf("lance: read blob value %d: %w", i, err)
			}
		}
		bitutil.SetBit(valid, i)
	}
	out := array.NewData(dt, d.Len(), []*memory.Buffer{lanceenc.BufOrNil(valid, nulls), lanceenc.OffsetsBuffer(dt, offs), memory.NewBufferBytes(data)}, nil, nulls, 0)
	defer out.Release()
	return array.MakeFromData(out), nil
}

// blobDesc is a blob description: the value's position in the file and
// its size.
func blobDesc(b []byte) (pos, size uint64) {
	return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
}

package lancefile

import (
	"encoding/binary"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile/lanceenc"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// page is one encoded page: its buffers, row count and encoding.
type page struct {
	bufs   [][]byte
	length uint64
	enc    *aenc                     // format 2.0
	layout *encodings21pb.PageLayout // formats 2.1 and 2.2
}

// nullable wraps values (whose buffers start at index first+1 when there
// is a validity buffer) in the Nullable encoding matching the chunks'
// nulls, prepending the validity buffer when some rows are null.
func nullable(chunks []arrow.Array, p *page, values func(first int) *aenc) {
	nn, n := lanceenc.Nulls(chunks)
	switch {
	case n > 0 && nn == n:
		p.enc = nullableEnc(allNulls, nil, nil)
	case nn == 0:
		p.enc = nullableEnc(noNulls, nil, values(0))
	default:
		var v lanceenc.BitWriter
		for _, c := range chunks {
			v.ValidityOf(c)
		}
		p.bufs = append(p.bufs, v.Bytes())
		p.enc = nullableEnc(someNulls, flatEnc(1, 0), values(1))
	}
	p.length = uint64(n)
}

// encodeFixed encodes numbers, bools, dates and timestamps.
func encodeFixed(dt arrow.DataType, chunks []arrow.Array) page {
	var p page
	nullable(chunks, &p, func(first int) *aenc {
		vals, bits := lanceenc.FixedValues(dt, chunks)
		p.bufs = append(p.bufs, vals)
		return flatEnc(bits, first)
	})
	return p
}

// encodeBinary encodes utf8/binary: u64 end offsets (no leading 0, nulls
// stored as base + null_adjustment) and the bytes of the valid values.
// Both buffers are sized up front; a chunk without nulls is copied in one
// piece (its values are contiguous), with its offsets rebased in a loop.
func encodeBinary(chunks []arrow.Array) page {
	var total int64
	var n int
	for _, c := range chunks {
		off, _ := lanceenc.BinaryChunk(c)
		n += c.Len()
		if c.NullN() == 0 {
			total += off(c.Len()) - off(0)
			continue
		}
		for i := range c.Len() {
			if c.IsValid(i) {
				total += off(i+1) - off(i)
			}
		}
	}
	adj := uint64(total) + 1
	offs := make([]byte, 8*n)
	bytes := make([]byte, 0, total)
	row := 0
	for _, c := range chunks {
		off, data := lanceenc.BinaryChunk(c)
		if c.NullN() == 0 {
			base, first := uint64(len(bytes)), off(0)
			bytes = append(bytes, data[first:off(c.Len())]...)
			for i := range c.Len() {
				binary.LittleEndian.PutUint64(offs[8*(row+i):], base+uint64(off(i+1)-first))
			}
			row += c.Len()
			continue
		}
		for i := range c.Len() {
			pos := uint64(len(bytes))
			if c.IsNull(i) {
				binary.LittleEndian.PutUint64(offs[8*row:], pos+adj)
			} else {
				bytes = append(bytes, data[off(i):off(i+1)]...)
				binary.LittleEndian.PutUint64(offs[8*row:], uint64(len(bytes)))
			}
			row++
		}
	}
	return page{
		bufs:   [][]byte{offs, bytes},
		length: uint64(n),
		enc: &aenc{kind: aeBinary, nullAdj: adj, bytes: flatEnc(8, 1),
			values: nullableEnc(noNulls, nil, flatEnc(64, 0))},
	}
}

// encodeFSL encodes fixed_size_list<fixed width>: [row validity?, item
// validity?, item values].
func encodeFSL(dt *arrow.FixedSizeListType, chunks []arrow.Array) page {
	var p page
	nullable(chunks, &p, func(first int) *aenc {
		items := lanceenc.FSLItems(chunks)
		defer lanceenc.ReleaseAll(items)
		ip := encodeFixed(dt.Elem(), items)
		// Re-base the item encoding's buffer indices after the row validity.
		shiftBuffers(ip.enc, first)
		p.bufs = append(p.bufs, ip.bufs...)
		return &aenc{kind: aeFSL, dim: uint32(dt.Len()), values: ip.enc}
	})
	return p
}

func shiftBuffers(a *aenc, by int) {
	if a == nil {
		return
	}
	if a.kind == aeFlat {
		a.buf += uint32(by)
	}
	shiftBuffers(a.validity, by)
	shiftBuffers(a.values, by)
	shiftBuffers(a.bytes, by)
}

// encodeList encodes a list column page (u64 end offsets counting items,
// nulls stored as base + len + null_offset_adjustment) and returns the
// item arrays of the page, which the caller encodes into the next column
// and releases.
func encodeList(chunks []arrow.Array) (page, []arrow.Array) {
	var (
		numItems int64
		items    = make([]arrow.Array, len(chunks))
		n        int
	)
	for i, c := range chunks {
		l := c.(*array.List)
		o := listOffsets(l)
		items[i] = array.NewSlice(l.ListValues(), int64(o[0]), int64(o[len(o)-1]))
		numItems += int64(o[len(o)-1] - o[0])
	}
	adj := uint64(numItems) + 1
	var offs []byte
	var pos uint64
	for _, c := range chunks {
		l := c.(*array.List)
		o := listOffsets(l)
		for i := range l.Len() {
			pos += uint64(o[i+1] - o[i])
			v := pos
			if l.IsNull(i) {
				v += adj
			}
			offs = binary.LittleEndian.AppendUint64(offs, v)
		}
		n += l.Len()
	}
	return page{
		bufs:   [][]byte{offs},
		length: uint64(n),
		enc: &aenc{kind: aeList, nullAdj: adj, numItems: uint64(numItems),
			values: nullableEnc(noNulls, nil, flatEnc(64, 0))},
	}, items
}

// listOffsets returns the Arrow offsets of l's rows (one more than rows).
func listOffsets(l *array.List) []int32 {
	off := l.Data().Offset()
	return l.Offsets()[off : off+l.Len()+1]
}

// encodeColumns encodes chunks of one field of type dt (and, for lists
// and structs, its children) as one page per column, in pre-order, calling
// emit for each column index. Empty chunks are skipped (their buffers may
// be absent); a page may hold zero rows.
func encodeColumns(dt arrow.DataType, all []arrow.Array, col int, emit func(col int, p page) error) (int, error) {
	var chunks []arrow.Array
	for _, c := range all {
		if c.Len() > 0 {
			chunks = append(chunks, c)
		}
	}
	switch dt.ID() {
	case arrow.STRING, arrow.BINARY, arrow.LARGE_STRING, arrow.LARGE_BINARY:
		return col + 1, emit(col, encodeBinary(chunks))
	case arrow.FIXED_SIZE_LIST:
		return col + 1, emit(col, encodeFSL(dt.(*arrow.FixedSizeListType), chunks))
	case arrow.LIST:
		p, items := encodeList(chunks)
		defer lanceenc.ReleaseAll(items)
		if err := emit(col, p); err != nil {
			return 0, err
		}
		return encodeColumns(dt.(*arrow.ListType).Elem(), items, col+1, emit)
	case arrow.STRUCT:
		nn, n := lanceenc.Nulls(chunks)
		if nn > 0 {
			return 0, writers.Errorf(writers.ErrInvalid, "lance: struct column has %d null rows; Lance file format 2.0 cannot store null structs: make the struct non-null (null its fields instead)", nn)
		}
		if err := emit(col, page{length: uint64(n), enc: &aenc{kind: aeStruct}}); err != nil {
			return 0, err
		}
		col++
		st := dt.(*arrow.StructType)
		for k := range st.NumFields() {
			kids := make([]arrow.Array, len(chunks))
			for i, c := range chunks {
				kids[i] = c.(*array.Struct).Field(k)
			}
			var err error
			if col, err = encodeColumns(st.Field(k).Type, kids, col, emit); err != nil {
				return 0, err
			}
		}
		return col, nil
	}
	return col + 1, emit(col, encodeFixed(dt, chunks))
}

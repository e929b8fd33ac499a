package lancefile

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/lance/lancefile/lanceenc"
)

// readColumn decodes column col (and, for lists and structs, the columns
// of its children that follow) as one array of type dt allocated from
// mem. It returns the next column index.
func (f *FileReader) readColumn(mem memory.Allocator, bud *lanceenc.Budget, dt arrow.DataType, col int) (arrow.Array, int, error) {
	if col < 0 || col >= len(f.columns) {
		return nil, 0, fmt.Errorf("column %d: the file has %d columns", col, len(f.columns))
	}
	switch dt := dt.(type) {
	case *arrow.ListType:
		return f.readList(mem, bud, dt, col)
	case *arrow.StructType:
		return f.readStruct(mem, bud, dt, col)
	}
	var parts []arrow.Array
	defer func() { lanceenc.ReleaseAll(parts) }()
	for _, p := range f.columns[col] {
		bufs, err := f.buffers(bud, p)
		if err != nil {
			return nil, 0, err
		}
		d, err := decodeLeaf(bud, dt, p.enc, bufs, int(p.length))
		if err != nil {
			return nil, 0, err
		}
		parts = append(parts, array.MakeFromData(d))
		d.Release()
	}
	if len(parts) == 0 {
		return array.MakeArrayOfNull(mem, dt, 0), col + 1, nil
	}
	out, err := array.Concatenate(parts, mem)
	return out, col + 1, err
}

func (f *FileReader) readStruct(mem memory.Allocator, bud *lanceenc.Budget, dt *arrow.StructType, col int) (arrow.Array, int, error) {
	var n uint64
	for _, p := range f.columns[col] {
		if p.enc.kind != aeStruct {
			return nil, 0, fmt.Errorf("struct column page has encoding %d, want struct", p.enc.kind)
		}
		n += p.length
	}
	next := col + 1
	kids := make([]arrow.ArrayData, 0, dt.NumFields())
	defer func() {
		for _, k := range kids {
			k.Release()
		}
	}()
	for i := range dt.NumFields() {
		arr, nx, err := f.readColumn(mem, bud, dt.Field(i).Type, next)
		if err != nil {
			return nil, 0, err
		}
		next = nx
		if got := arr.Len(); uint64(got) != n {
			arr.Release()
			return nil, 0, fmt.Errorf("struct child %q has %d rows, the struct %d", dt.Field(i).Name, got, n)
		}
		kids = append(kids, arr.Data())
		arr.Data().Retain()
		arr.Release()
	}
	d := array.NewData(dt, int(n), []*memory.Buffer{nil}, kids, 0, 0)
	defer d.Release()
	return array.MakeFromData(d), next, nil
}

func (f *FileReader) readList(mem memory.Allocator, bud *lanceenc.Budget, dt *arrow.ListType, col int) (arrow.Array, int, error) {
	items, next, err := f.readColumn(mem, bud, dt.Elem(), col+1)
	if err != nil {
		return nil, 0, err
	}
	defer items.Release()
	var (
		offsets  = []int32{0}
		valid    lanceenc.BitWriter
		nullsN   int
		pageBase uint64
	)
	for _, p := range f.columns[col] {
		if p.enc.kind != aeList {
			return nil, 0, fmt.Errorf("list column page has encoding %d, want list", p.enc.kind)
		}
		bufs, err := f.buffers(bud, p)
		if err != nil {
			return nil, 0, err
		}
		ends, err := decodeUints(p.enc.values, bufs, int(p.length))
		if err != nil {
			return nil, 0, err
		}
		adj := p.enc.nullAdj
		if adj == 0 {
			adj = 1 << 63 // no nulls possible
		}
		// Every page's items are a slice of the item column: checked
		// before adding, the running base can neither overflow nor pass
		// the items read, which an int32 offset holds.
		if p.enc.numItems > uint64(items.Len())-pageBase || items.Len() > math.MaxInt32 {
			return nil, 0, fmt.Errorf("list pages reference more items than the item column's %d", items.Len())
		}
		prev := uint64(0)
		for _, v := range ends {
			isNull := v >= adj
			end := v % adj
			if end > p.enc.numItems || end < prev {
				return nil, 0, fmt.Errorf("list offset %d is outside %d..%d (the page's items)", end, prev, p.enc.numItems)
			}
			prev = end
			offsets = append(offsets, int32(pageBase+end))
			valid.AppendBits([]byte{boolByte(!isNull)}, 0, 1)
			if isNull {
				nullsN++
			}
		}
		pageBase += p.enc.numItems
	}
	if pageBase != uint64(items.Len()) {
		return nil, 0, fmt.Errorf("list pages reference %d items, the item column has %d", pageBase, items.Len())
	}
	n := len(offsets) - 1
	var vb *memory.Buffer
	if nullsN > 0 {
		vb = memory.NewBufferBytes(valid.Bytes())
	}
	ob := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets))
	d := array.NewData(dt, n, []*memory.Buffer{vb, ob}, []arrow.ArrayData{items.Data()}, nullsN, 0)
	defer d.Release()
	tmp := array.MakeFromData(d)
	defer tmp.Release()
	// Copy into mem so the result owns allocator memory only.
	out, err := array.Concatenate([]arrow.Array{tmp}, mem)
	return out, next, err
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// pageBuffer returns buffer i of a page, checking it holds need bytes.
func pageBuffer(bufs [][]byte, i uint32, need uint64) ([]byte, error) {
	if int(i) >= len(bufs) {
		return nil, fmt.Errorf("encoding references buffer %d of a page with %d", i, len(bufs))
	}
	if uint64(len(bufs[i])) < need {
		return nil, fmt.Errorf("page buffer %d has %d bytes, need %d", i, len(bufs[i]), need)
	}
	return bufs[i], nil
}

// decodeUints decodes an unsigned integer vector (offsets, indices): a
// flat encoding of 8 to 64 bits, possibly wrapped in Nullable no_nulls.
func decodeUints(a *aenc, bufs [][]byte, n int) ([]uint64, error) {
	if a != nil && a.kind == aeNullable && a.null == noNulls {
		a = a.values
	}
	if a == nil || a.kind != aeFlat || a.compressed {
		return nil, fmt.Errorf("unsupported encoding of offsets or indices")
	}
	w := a.bits / 8
	if a.bits%8 != 0 || w == 0 || w > 8 || w&(w-1) != 0 {
		return nil, fmt.Errorf("offsets of %d bits are not supported", a.bits)
	}
	b, err := pageBuffer(bufs, a.buf, uint64(n)*w)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, n)
	for i := range out {
		switch w {
		case 1:
			out[i] = uint64(b[i])
		case 2:
			out[i] = uint64(binary.LittleEndian.Uint16(b[2*i:]))
		case 4:
			out[i] = uint64(binary.LittleEndian.Uint32(b[4*i:]))
		case 8:
			out[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
	}
	return out, nil
}

// decodeLeaf decodes one page of a non-nested column (fixed width,
// binary, dictionary, fixed-size list) into Go memory.
func decodeLeaf(bud *lanceenc.Budget, dt arrow.DataType, a *aenc, bufs [][]byte, n int) (arrow.ArrayData, error) {
	switch a.kind {
	case aeNullable:
		switch a.null {
		case allNulls:
			if err := bud.SpendUnbacked(lanceenc.NullBytes(dt, uint64(n)), "an all-null page"); err != nil {
				return nil, err
			}
			arr := array.MakeArrayOfNull(memory.DefaultAllocator, dt, n)
			defer arr.Release()
			d := arr.Data()
			d.Retain()
			return d, nil
		case noNulls:
			if a.values == nil {
				return nil, fmt.Errorf("nullable encoding without values")
			}
			return decodeLeaf(bud, dt, a.values, bufs, n)
		case someNulls:
			if a.values == nil || a.validity == nil || a.validity.kind != aeFlat || a.validity.bits != 1 {
				return nil, fmt.Errorf("unsupported validity encoding")
			}
			valid, err := pageBuffer(bufs, a.validity.buf, uint64(bitutil.BytesForBits(int64(n))))
			if err != nil {
				return nil, err
			}
			inner, err := decodeLeaf(bud, dt, a.values, bufs, n)
			if err != nil {
				return nil, err
			}
			defer inner.Release()
			return withValidity(inner, valid), nil
		}
		return nil, fmt.Errorf("unknown nullability %d", a.null)
	case aeFlat:
		return decodeFlat(dt, a, bufs, n)
	case aeBinary:
		return decodeBinary(dt, a, bufs, n)
	case aeDictionary:
		return decodeDictionary(bud, dt, a, bufs, n)
	case aeFSL:
		fsl, ok := dt.(*arrow.FixedSizeListType)
		if !ok || a.values == nil || int32(a.dim) != fsl.Len() {
			return nil, fmt.Errorf("fixed_size_list encoding (dimension %d) does not match type %s", a.dim, dt)
		}
		items, err := decodeLeaf(bud, fsl.Elem(), a.values, bufs, n*int(a.dim))
		if err != nil {
			return nil, err
		}
		defer items.Release()
		return array.NewData(dt, n, []*memory.Buffer{nil}, []arrow.ArrayData{items}, 0, 0), nil
	}
	return nil, fmt.Errorf("encoding %d cannot hold type %s", a.kind, dt)
}

func decodeFlat(dt arrow.DataType, a *aenc, bufs [][]byte, n int) (arrow.ArrayData, error) {
	fw, ok := dt.(arrow.FixedWidthDataType)
	if !ok || a.compressed {
		return nil, fmt.Errorf("flat encoding cannot hold type %s (or is compressed)", dt)
	}
	if a.bits != uint64(fw.BitWidth()) {
		return nil, fmt.Errorf("flat encoding of %d bits for type %s", a.bits, dt)
	}
	b, err := pageBuffer(bufs, a.buf, uint64(bitutil.BytesForBits(int64(n)*int64(a.bits))))
	if err != nil {
		return nil, err
	}
	return array.NewData(dt, n, []*memory.Buffer{nil, memory.NewBufferBytes(b)}, nil, 0, 0), nil
}

// withValidity returns d with validity ANDed into its own.
func withValidity(d arrow.ArrayData, valid []byte) arrow.ArrayData {
	n := d.Len()
	v := make([]byte, bitutil.BytesForBits(int64(n)))
	own := d.Buffers()[0]
	for i := range n {
		if bitutil.BitIsSet(valid, i) && (own == nil || bitutil.BitIsSet(own.Bytes(), d.Offset()+i)) {
			bitutil.SetBit(v, i)
		}
	}
	bufs := append([]*memory.Buffer{memory.NewBufferBytes(v)}, d.Buffers()[1:]...)
	nulls := n - bitutil.CountSetBits(v, 0, n)
	return array.NewData(d.DataType(), n, bufs, d.Children(), nulls, d.Offset())
}

func isLarge(dt arrow.DataType) bool {
	return dt.ID() == arrow.LARGE_STRING || dt.ID() == arrow.LARGE_BINARY
}

// binaryData builds a binary-like array from per-row values (nil = null).
func binaryData(dt arrow.DataType, n int, value func(i int) ([]byte, bool)) arrow.ArrayData {
	var (
		valid lanceenc.BitWriter
		data  []byte
		o32   = []int32{0}
		o64   = []int64{0}
		nullN int
	)
	for i := range n {
		v, ok := value(i)
		if !ok {
			nullN++
		}
		data = append(data, v...)
		valid.AppendBits([]byte{boolByte(ok)}, 0, 1)
		o32 = append(o32, int32(len(data)))
		o64 = append(o64, int64(len(data)))
	}
	offs := arrow.Int32Traits.CastToBytes(o32)
	if isLarge(dt) {
		offs = arrow.Int64Traits.CastToBytes(o64)
	}
	var vb *memory.Buffer
	if nullN > 0 {
		vb = memory.NewBufferBytes(valid.Bytes())
	}
	return array.NewData(dt, n, []*memory.Buffer{vb, memory.NewBufferBytes(offs), memory.NewBufferBytes(data)}, nil, nullN, 0)
}

func checkBinaryType(dt arrow.DataType) error {
	switch dt.ID() {
	case arrow.STRING, arrow.BINARY, arrow.LARGE_STRING, arrow.LARGE_BINARY:
		return nil
	}
	return fmt.Errorf("binary encoding cannot hold type %s", dt)
}

func decodeBinary(dt arrow.DataType, a *aenc, bufs [][]byte, n int) (arrow.ArrayData, error) {
	if err := checkBinaryType(dt); err != nil {
		return nil, err
	}
	ends, err := decodeUints(a.values, bufs, n)
	if err != nil {
		return nil, err
	}
	if a.bytes == nil || a.bytes.kind != aeFlat || a.bytes.bits != 8 {
		return nil, fmt.Errorf("unsupported binary bytes encoding")
	}
	adj := a.nullAdj
	if adj == 0 {
		adj = 1 << 63
	}
	data, err := pageBuffer(bufs, a.bytes.buf, 0)
	if err != nil {
		return nil, err
	}
	var base uint64
	var bad error
	d := binaryData(dt, n, func(i int) ([]byte, bool) {
		end := ends[i] % adj
		start := base
		base = end
		if end < start || end > uint64(len(data)) {
			bad = fmt.Errorf("binary offsets %d..%d outside %d bytes", start, end, len(data))
			return nil, false
		}
		return data[start:end], ends[i] < adj
	})
	if bad != nil {
		d.Release()
		return nil, bad
	}
	return d, nil
}

// decodeDictionary materializes a dictionary page (LanceDB writes them
// for low-cardinality strings): index 0 is null, k is item k-1.
func decodeDictionary(bud *lanceenc.Budget, dt arrow.DataType, a *aenc, bufs [][]byte, n int) (arrow.ArrayData, error) {
	if err := checkBinaryType(dt); err != nil {
		return nil, err
	}
	if a.numItems > lanceenc.MaxPageRows {
		return nil, fmt.Errorf("dictionary of %d items exceeds the reader's limit of %d", a.numItems, lanceenc.MaxPageRows)
	}
	idx, err := decodeUints(a.values, bufs, n)
	if err != nil {
		return nil, err
	}
	if a.bytes == nil {
		return nil, fmt.Errorf("dictionary without items")
	}
	items, err := decodeLeaf(bud, dt, a.bytes, bufs, int(a.numItems))
	if err != nil {
		return nil, err
	}
	defer items.Release()
	ia := array.MakeFromData(items).(array.BinaryLike)
	defer ia.Release()
	var expanded uint64
	for _, k := range idx {
		if k > 0 && k <= uint64(ia.Len()) {
			expanded += uint64(ia.ValueLen(int(k - 1)))
		}
	}
	if err := bud.SpendUnbacked(expanded, "a dictionary page"); err != nil {
		return nil, err
	}
	var bad error
	d := binaryData(dt, n, func(i int) ([]byte, bool) {
		k := idx[i]
		if k == 0 {
			return nil, false
		}
		if k > uint64(ia.Len()) {
			bad = fmt.Errorf("dictionary index %d outside %d items", k, ia.Len())
			return nil, false
		}
		return valueBytes(ia, int(k-1)), ia.IsValid(int(k - 1))
	})
	if bad != nil {
		d.Release()
		return nil, bad
	}
	return d, nil
}

// valueBytes returns item i of a (ValueOffset64 of String and LargeString
// refuses i == Len, so the end is start + ValueLen).
func valueBytes(a array.BinaryLike, i int) []byte {
	start := a.ValueOffset64(i) - a.ValueOffset64(0)
	return a.ValueBytes()[start : start+int64(a.ValueLen(i))]
}

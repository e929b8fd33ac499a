package lanceenc

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cespare/xxhash/v2"
	"github.com/pierrec/lz4/v4"

	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// Dictionary columns (pandas categoricals) in format 2.1+, as pylance
// writes them: mini-block pages of the indices (at the index type's
// width, so that readers rebuild the Arrow dictionary type) whose layout
// carries the dictionary, block-encoded in a buffer of its own. A page
// holds the chunks of one flush, as other columns' pages do, with one
// dictionary: the chunks' own when they share it (a Flight stream sends
// one for all its batches), else their union with the indices remapped.

// pageDict is a mini-block page's dictionary.
type pageDict struct {
	n   int
	buf []byte
	enc *encodings21pb.CompressiveEncoding
}

// lz4 is the dictionary as pylance stores variable-width dictionaries in
// format 2.2: its binary block LZ4-compressed, led by its size, even when
// that does not shrink it (a dictionary of 16 short values grows by a few
// bytes; pylance wraps it all the same).
func (d *pageDict) lz4() *pageDict {
	if _, ok := d.enc.Compression.(*encodings21pb.CompressiveEncoding_Variable); !ok {
		return d
	}
	out := make([]byte, 4+lz4.CompressBlockBound(len(d.buf)))
	binary.LittleEndian.PutUint32(out, uint32(len(d.buf)))
	var c lz4.Compressor
	n, err := c.CompressBlock(d.buf, out[4:])
	if err != nil || n == 0 {
		return d
	}
	return &pageDict{n: d.n, buf: out[:4+n], enc: &encodings21pb.CompressiveEncoding{Compression: &encodings21pb.CompressiveEncoding_General{General: &encodings21pb.General{
		Compression: &encodings21pb.BufferCompression{Scheme: encodings21pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4},
		Values:      d.enc}}}}
}

// encodeDictionary emits the chunks as one dictionary page into column
// col, or one page per chunk when their union outgrows the index type.
func encodeDictionary(chunks []arrow.Array, col int, minor uint16, emit func(col int, p Page) error) error {
	dict, transpose, err := pageDictionary(chunks)
	if err != nil {
		return err
	}
	if dict == nil { // the union needs a wider index type
		for _, c := range chunks {
			if err := encodeDictionary([]arrow.Array{c}, col, minor, emit); err != nil {
				return err
			}
		}
		return nil
	}
	defer dict.Release()
	leaf := make([]leafCol, len(chunks))
	for i, c := range chunks {
		var tr []int32
		if transpose != nil {
			tr = transpose[i]
		}
		leaf[i] = leafCol{vals: dictIndices(c.(*array.Dictionary), tr)}
	}
	p, err := encodeLeaf21(leaf, minor, dictionaryOf(dict))
	for _, l := range leaf {
		l.vals.Release()
	}
	if err != nil {
		return err
	}
	return emit(col, p)
}

// pageDictionary returns the dictionary of a page of chunks (retained)
// and, when it is their union rather than the one they share, each
// chunk's index mapping into it; nil when the union has more entries than
// the index type can address.
func pageDictionary(chunks []arrow.Array) (arrow.Array, [][]int32, error) {
	first := chunks[0].(*array.Dictionary).Dictionary()
	shared := true
	for _, c := range chunks[1:] {
		d := c.(*array.Dictionary).Dictionary()
		if d.Data() != first.Data() && !array.Equal(d, first) {
			shared = false
			break
		}
	}
	if shared {
		first.Retain()
		return first, nil, nil
	}
	dt := chunks[0].DataType().(*arrow.DictionaryType)
	mem := memory.DefaultAllocator
	u, err := array.NewDictionaryUnifier(mem, dt.ValueType)
	if err != nil {
		return nil, nil, err
	}
	defer u.Release()
	transpose := make([][]int32, len(chunks))
	for i, c := range chunks {
		buf, err := u.UnifyAndTranspose(c.(*array.Dictionary).Dictionary())
		if err != nil {
			return nil, nil, err
		}
		transpose[i] = slices.Clone(arrow.Int32Traits.CastFromBytes(buf.Bytes()))
		buf.Release()
	}
	// Not GetResultWithIndexType: it takes 127 entries for int8 indices,
	// which address 128.
	_, dict, err := u.GetResult()
	if err != nil {
		return nil, nil, err
	}
	if dict.Len() > Addressable(dt.IndexType) {
		dict.Release()
		return nil, nil, nil // too many entries for the index type
	}
	return dict, transpose, nil
}

// dictIndices returns d's indices, mapped through transpose unless it is
// nil, null where the index or the value it points to is null (Lance
// keeps nulls in the indices only).
func dictIndices(d *array.Dictionary, transpose []int32) arrow.Array {
	idx := d.Indices()
	if d.Dictionary().NullN() == 0 && transpose == nil {
		idx.Retain()
		return idx
	}
	data := idx.Data()
	values := alignedValues(data)
	if transpose != nil {
		values = transposed(data, d, transpose)
	}
	valid := make([]byte, bitutil.BytesForBits(int64(idx.Len())))
	nulls := 0
	for i := range idx.Len() {
		if idx.IsValid(i) && d.Dictionary().IsValid(d.GetValueIndex(i)) {
			bitutil.SetBit(valid, i)
		} else {
			nulls++
		}
	}
	out := array.NewData(data.DataType(), data.Len(), []*memory.Buffer{memory.NewBufferBytes(valid), values}, nil, nulls, 0)
	defer out.Release()
	return array.MakeFromData(out)
}

// transposed returns the value buffer of d's indices mapped through
// transpose, at the index type's width (null indices become 0).
func transposed(data arrow.ArrayData, d *array.Dictionary, transpose []int32) *memory.Buffer {
	w := data.DataType().(arrow.FixedWidthDataType).BitWidth() / 8
	out := make([]byte, w*data.Len())
	var tmp [8]byte
	for i := range data.Len() {
		if d.IsNull(i) {
			continue
		}
		// Little-endian and below the index type's maximum (the union
		// fits it), so the low w bytes hold the value whatever its sign.
		binary.LittleEndian.PutUint64(tmp[:], uint64(transpose[d.GetValueIndex(i)]))
		copy(out[i*w:], tmp[:w])
	}
	return memory.NewBufferBytes(out)
}

// alignedValues returns the value buffer of fixed-width data starting at
// its first row.
func alignedValues(data arrow.ArrayData) *memory.Buffer {
	w := data.DataType().(arrow.FixedWidthDataType).BitWidth() / 8
	b := data.Buffers()[1].Bytes()
	return memory.NewBufferBytes(b[data.Offset()*w : (data.Offset()+data.Len())*w])
}

// dictionaryOf block-encodes a dictionary's values: variable-width ones
// as Lance's binary block, fixed-width ones flat.
func dictionaryOf(values arrow.Array) *pageDict {
	n := values.Len()
	if _, ok := values.DataType().(arrow.BinaryDataType); !ok {
		b, bits := FixedValues(values.DataType(), []arrow.Array{values})
		return &pageDict{n: n, buf: b, enc: flatEncoding(int(bits))}
	}
	offs, data, _ := varValues([]arrow.Array{values}, n, exactBuf)
	return binaryDictionary(values.DataType(), offs, data)
}

// binaryDictionary is Lance's binary block of n = len(offs)-1 values: bits
// per offset and the bytes' start (both 32 or both 64 bits), the
// offsets, the bytes.
func binaryDictionary(dt arrow.DataType, offs []uint64, data []byte) *pageDict {
	n := len(offs) - 1
	large := dt.ID() == arrow.LARGE_STRING || dt.ID() == arrow.LARGE_BINARY
	w := 4
	if large {
		w = 8
	}
	hdr := 2*w + w*(n+1)
	out := make([]byte, 0, hdr+len(data))
	put := func(v uint64) {
		if large {
			out = binary.LittleEndian.AppendUint64(out, v)
		} else {
			out = binary.LittleEndian.AppendUint32(out, uint32(v))
		}
	}
	put(uint64(8 * w))
	put(uint64(hdr))
	for _, o := range offs {
		put(o)
	}
	return &pageDict{n: n, buf: append(out, data...), enc: variableEncoding(8 * w)}
}

// dictionaryEncode returns the 32-bit indices of a page's variable-width
// values into a dictionary of their distinct values when pylance would
// make one (at least 100 values; the dictionary's bytes and offsets plus
// 4 bytes per index under 80% of the values' bytes and offsets; no more
// distinct values than dictMaxDistinct), or nil. The indices are bit-packed later, so the
// estimate is conservative. Null values (empty here) index whatever
// entry holds the empty value: their definition levels make them null.
func dictionaryEncode(dt arrow.DataType, p *pageStrings) ([]byte, *pageDict) {
	rows := p.rows
	if rows < 100 || p.bytes == 0 {
		return nil, nil
	}
	// Lance counts the values' offsets in their size (4 bytes each).
	size := p.bytes + 4*rows
	avg := size / rows
	// The most distinct values for which the dictionary pays.
	limit := min((size*8/10-4*rows)/(avg+4), dictMaxDistinct(rows))
	if limit <= 0 {
		return nil, nil
	}
	// Too many distinct values end it before any map is built (names,
	// ids); the estimate also sizes the map.
	est := estimateDistinct(p, limit)
	if est > limit {
		return nil, nil
	}
	t := newDictTable(est)
	idx := make([]byte, 4*rows)
	if !p.index(t, limit, idx) {
		return nil, nil
	}
	return idx, binaryDictionary(dt, t.offs, t.data)
}

// dictMaxDistinct is the most distinct values of a page of rows strings
// that pylance 14 stores as a dictionary (more go FSST-compressed),
// measured with random values of 8 and 30 bytes: about 2,550 for pages of
// up to 65,536 values, 1,740 at 262,144 and 390 at 1,048,576, whatever
// the values' length. This follows it within a tenth.
func dictMaxDistinct(rows int) int {
	return min(2550, int(4.1e8/float64(rows)))
}

// dictTable is the dictionary of one page being built: its distinct
// values (offs, data) and an open-addressing table of their indexes,
// hashed from the values' bytes, so that a lookup copies no key and
// allocates nothing (a Go map of strings copied every new value into a
// key of its own and spent a quarter of an append's CPU in lookups).
type dictTable struct {
	offs  []uint64
	data  []byte
	slots []uint32 // index+1 of a distinct value; 0: empty
	seed  maphash.Seed
}

func newDictTable(expect int) *dictTable {
	n := 64
	for n < 2*expect {
		n *= 2
	}
	return &dictTable{offs: []uint64{0}, slots: make([]uint32, n), seed: maphash.MakeSeed()}
}

// index returns v's index in the dictionary, adding it when it is new;
// ok is false when that would make more than limit values.
func (t *dictTable) index(v []byte, limit int) (k uint32, ok bool) {
	mask := uint64(len(t.slots) - 1)
	for i := maphash.Bytes(t.seed, v) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			break
		}
		if bytes.Equal(t.data[t.offs[s-1]:t.offs[s]], v) {
			return s - 1, true
		}
	}
	n := len(t.offs) - 1
	if n == limit {
		return 0, false
	}
	t.data = append(t.data, v...)
	t.offs = append(t.offs, uint64(len(t.data)))
	if 2*(n+1) > len(t.slots) {
		t.grow()
	} else {
		t.place(n, v)
	}
	return uint32(n), true
}

// place puts value n (whose bytes are v) in its slot.
func (t *dictTable) place(n int, v []byte) {
	mask := uint64(len(t.slots) - 1)
	i := maphash.Bytes(t.seed, v) & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = uint32(n + 1)
}

// grow doubles the table and places every value again.
func (t *dictTable) grow() {
	t.slots = make([]uint32, 2*len(t.slots))
	for n := range len(t.offs) - 1 {
		t.place(n, t.data[t.offs[n]:t.offs[n+1]])
	}
}

// estimateDistinct estimates the distinct values of offs from a stride
// sample of up to 4,096 of them: d distinct values among s sampled ones
// are about D(1 - e^(-s/D)) of D distinct values repeating at random,
// solved for D (a sample without a repeat: as many as there are values).
// Clustered values repeat more in the sample and read fewer, which only
// makes dictionaryEncode try a dictionary that its own bound (limit)
// then stops.
//
// A sample that alone holds more than limit distinct values ends it early,
// estimating rows. Values are told apart by their xxhash (no key copies,
// the same estimate for the same page; a collision only lowers it by one).
func estimateDistinct(p *pageStrings, limit int) int {
	rows := p.rows
	s := min(rows, 4096)
	stride := rows / s
	seen := make(map[uint64]struct{}, min(s, limit+1))
	for i := range s {
		seen[xxhash.Sum64(p.at(i*stride))] = struct{}{}
		if len(seen) > limit {
			return rows
		}
	}
	d := float64(len(seen))
	expect := func(D float64) float64 { return D * (1 - math.Exp(-float64(s)/D)) }
	if d >= float64(s) || expect(float64(rows)) <= d {
		return rows
	}
	lo, hi := d, float64(rows)
	for range 40 {
		if mid := (lo + hi) / 2; expect(mid) < d {
			lo = mid
		} else {
			hi = mid
		}
	}
	return int(hi)
}

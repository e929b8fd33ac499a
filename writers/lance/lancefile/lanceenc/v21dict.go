package lanceenc

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"iter"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
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
	p, err := encodeLeaf21(leaf, minor, dictionaryOf(dict), nil)
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
	// ids); the estimate sizes the map. An estimate over limit from a
	// sample of at most limit distinct values (sorted values read as more
	// than they are) leaves it to the map, bounded by limit.
	est, over := estimateDistinct(p, limit)
	if over {
		return nil, nil
	}
	t := newDictTable(min(est, limit))
	idx := scratchOf(4 * rows) // recycled with the page's values
	if !p.index(t, limit, idx) {
		putScratch(idx)
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
// values (offs, data) and an open-addressing table of their indexes, so
// that a lookup copies no key and allocates nothing (a Go map of strings
// copied every new value into a key of its own and spent a quarter of an
// append's CPU in lookups). A slot holds a value of up to 16 bytes
// itself, as two words and its length, so that most dictionary values
// are found by comparing words; a longer value's slot holds its hash and
// the bytes are compared where hash and length agree.
type dictTable struct {
	offs  []uint64
	data  []byte
	slots []dictSlot
	seed  [3]uint64
	mseed maphash.Seed
}

// dictSlot is a distinct value in the table: its key words (see
// dictTable.key), its length plus one (0: an empty slot) and its index.
type dictSlot struct {
	a, b uint64
	size uint32
	k    uint32
}

// newDictTable returns a table for about expect distinct values: at
// least twice as many slots, and at least 256 (6 KiB), so that a few
// categories rarely share a slot: a lookup that probes a second slot, at
// random from value to value, is a branch the core mispredicts
// (BenchmarkDictTableIndex/short, 16 values: 64 slots 20-22 ns a value,
// 256 slots 16-17.5).
func newDictTable(expect int) *dictTable {
	n := 256
	for n < 2*expect {
		n *= 2
	}
	t := &dictTable{offs: []uint64{0}, slots: make([]dictSlot, n), mseed: maphash.MakeSeed()}
	for i := range t.seed {
		t.seed[i] = rand.Uint64()
	}
	return t
}

// key returns v's key words and its hash, seeded per table. A value of up
// to 16 bytes is its own key: two little-endian loads (overlapping below
// 16 bytes, or its first, middle and last byte below 4) that, with its
// length, tell it from any other; a longer value's key is its hash.
func (t *dictTable) key(v []byte) (a, b, h uint64) {
	switch n := len(v); {
	case n > 16:
		h = maphash.Bytes(t.mseed, v)
		return h, 0, h
	case n >= 8:
		a, b = binary.LittleEndian.Uint64(v), binary.LittleEndian.Uint64(v[n-8:])
	case n >= 4:
		a, b = uint64(binary.LittleEndian.Uint32(v)), uint64(binary.LittleEndian.Uint32(v[n-4:]))
	case n > 0:
		a = uint64(v[0])<<16 | uint64(v[n/2])<<8 | uint64(v[n-1])
	}
	hi, lo := bits.Mul64(a^t.seed[0], b^t.seed[1]^uint64(len(v)))
	hi, lo = bits.Mul64(hi^lo, t.seed[2]|1)
	return a, b, hi ^ lo
}

// index returns v's index in the dictionary, adding it when it is new;
// ok is false when that would make more than limit values.
func (t *dictTable) index(v []byte, limit int) (k uint32, ok bool) {
	a, b, h := t.key(v)
	size := uint32(len(v) + 1)
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.size == 0 {
			break
		}
		if s.a == a && s.b == b && s.size == size &&
			(size <= 17 || bytes.Equal(t.data[t.offs[s.k]:t.offs[s.k+1]], v)) {
			return s.k, true
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
		t.place(dictSlot{a: a, b: b, size: size, k: uint32(n)}, h)
	}
	return uint32(n), true
}

// place puts s, whose hash is h, in its slot.
func (t *dictTable) place(s dictSlot, h uint64) {
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i].size != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

// grow doubles the table and places every value again.
func (t *dictTable) grow() {
	t.slots = make([]dictSlot, 2*len(t.slots))
	for n := range len(t.offs) - 1 {
		v := t.data[t.offs[n]:t.offs[n+1]]
		a, b, h := t.key(v)
		t.place(dictSlot{a: a, b: b, size: uint32(len(v) + 1), k: uint32(n)}, h)
	}
}

// estimateDistinct estimates the distinct values of a page from a stride
// sample of up to 4,096 of them: d distinct values among s sampled ones
// are about D(1 - e^(-s/D)) of D distinct values repeating at random,
// solved for D (a sample without a repeat: as many as there are values).
// Values in runs read fewer when a run is shorter than the stride and
// more when it is longer (a sample of sorted values meets every one), so
// the estimate only sizes the dictionary's map.
//
// over reports more than limit distinct values: a sample that alone
// holds more (certain; the estimate is then rows), or values nearly all
// distinct (names, ids: most pages without a dictionary), told by a
// first look (firstLookDistinct: wrong about a page of at most limit
// distinct values with a chance of about 1e-10, or for a client that
// places its values on the rows it reads). Values are told apart by a hash seeded
// per page (no key copies; a client cannot pick values whose hashes crowd
// the set; a collision only lowers the estimate by one).
//
// A first look that reads nearly only repeats (an estimate of at most
// fewCategories, and of a quarter of limit) is the estimate, without the
// stride sample, whose 4,096 values spread over the page are each a
// cache miss (BenchmarkEstimateDistinct/16: 205 µs with it, 43 without;
// hashing samples took 2.7 % of a 4-writer append's server CPU). Such a page
// holds a few values on nearly all its rows; any others (at most about
// an eighth of the rows, or values a client placed on the rows the first
// look skips) are counted by the map, which decides exactly: it gives up
// past limit, at worst after one pass over the page, as a dictionary
// page's indexing takes anyway.
func estimateDistinct(p *pageStrings, limit int) (est int, over bool) {
	rows := p.rows
	seed := maphash.MakeSeed()
	if first, looked := firstLookDistinct(p, limit, seed); looked {
		switch {
		case first > 4*limit:
			return rows, true
		case first <= min(fewCategories, limit/4):
			return first, false
		}
	}
	s := min(rows, 4096)
	d, over := sampleDistinct(p.sampled(rows/s, s), s, seed, limit)
	if over {
		return rows, true
	}
	return distinctFrom(d, s, rows), false
}

// firstLook is how many values firstLookDistinct reads; an estimate of
// at most fewCategories distinct values from them (at most 64 distinct of
// 512: seven reads in eight were repeats) ends estimateDistinct, when it
// is also at most a quarter of the limit.
const (
	firstLook     = 512
	fewCategories = firstLook / 8
)

// firstLookDistinct estimates a page's distinct values from firstLook
// values at random rows; an estimate over 4 × limit reads the page as
// mostly distinct (names, ids): a fifth of the stride sample's hashing
// for the many pages of names and ids. Rows drawn at random read repeats
// as often as the page holds them, whatever its order (a stride can step
// over every repeat of sorted or periodic values): a page of at most
// limit distinct values reads at most limit(1 - e^(-firstLook/limit)) of
// them on average, far below the bound (for limit 2,550: 464 against
// 499, six standard deviations). The rows are drawn the same way for
// every page of as many rows, so that a page always gets the same
// encoding; a client that arranges its values on them can only cost its
// page the dictionary. looked is false for a page of at most 4,096 rows
// or 4 × limit (its estimate could not exceed 4 × limit), which it leaves
// to the stride sample.
func firstLookDistinct(p *pageStrings, limit int, seed maphash.Seed) (est int, looked bool) {
	rows := p.rows
	if rows <= max(4096, 4*limit) {
		return 0, false
	}
	r := rand.New(rand.NewPCG(uint64(rows), 0x6c616e6365))
	at := make([]int, firstLook)
	for i := range at {
		at[i] = r.IntN(rows)
	}
	slices.Sort(at)
	d, _ := sampleDistinct(p.rowsAt(firstLook, func(i int) int { return at[i] }), firstLook, seed, firstLook)
	return distinctFrom(d, firstLook, rows), true
}

// sampleDistinct counts the distinct values of sample, s of them,
// stopping (over) past limit.
func sampleDistinct(sample iter.Seq[[]byte], s int, seed maphash.Seed, limit int) (d int, over bool) {
	seen := newHashSet(min(s, limit+1))
	for v := range sample {
		if seen.add(maphash.Bytes(seed, v)) && seen.n > limit {
			return seen.n, true
		}
	}
	return seen.n, false
}

// distinctFrom solves D(1 - e^(-s/D)) = d for D, at most rows.
func distinctFrom(d, s, rows int) int {
	expect := func(D float64) float64 { return D * (1 - math.Exp(-float64(s)/D)) }
	if d >= s || expect(float64(rows)) <= float64(d) {
		return rows
	}
	lo, hi := float64(d), float64(rows)
	for range 40 {
		if mid := (lo + hi) / 2; expect(mid) < float64(d) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return int(hi)
}

// hashSet is a set of 64-bit hashes, open-addressed (a Go map of them
// spent five times as long on a page's sample).
type hashSet struct {
	slots []uint64 // h|1 of a hash h; 0: empty
	n     int
}

// newHashSet returns a set for at most size hashes (it stays at most half
// full, so a probe always finds a free slot).
func newHashSet(size int) *hashSet {
	n := 64
	for n < 2*size {
		n *= 2
	}
	return &hashSet{slots: make([]uint64, n)}
}

// add adds h, reporting whether it was new. Hashes that differ in their
// lowest bit only count once.
func (s *hashSet) add(h uint64) bool {
	h |= 1
	mask := uint64(len(s.slots) - 1)
	i := h >> 1 & mask
	for ; s.slots[i] != 0; i = (i + 1) & mask {
		if s.slots[i] == h {
			return false
		}
	}
	if 2*(s.n+1) > len(s.slots) {
		panic("lanceenc: hashSet holds more hashes than it was made for")
	}
	s.slots[i] = h
	s.n++
	return true
}

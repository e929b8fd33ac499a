package lanceenc

import (
	"encoding/binary"
	"math/bits"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// Writing pages of format 2.1 and 2.2: one column per leaf, pages in the
// mini-block layout unless their values are too wide for it or their
// lists too sparse (then full-zip, v21fullzip.go). Integers (dates, times,
// timestamps, durations included) and floats are FastLanes bit-packed per
// chunk of 1024 values when that is smaller, strings and binaries stored
// as a dictionary of few distinct values (v21dict.go) or FSST-compressed
// (fsst.go), bools, decimals and vectors flat. Nulls of leaves and structs
// are definition levels, bit-packed. Chunks stay within
// format 2.1's limits (16-bit sizes, 32 KiB), which 2.2 readers accept
// too: a chunk takes fewer values when its levels would not fit.

// chunkAim is the raw size a chunk aims at (Lance aims at 4 KiB too).
const chunkAim = 4096

// maxMiniValue is the widest value a mini-block chunk takes; a page with
// a wider one is full-zipped (v21fullzip.go).
const maxMiniValue = 8 << 10

// leafCol is one leaf of a top-level field: without a list on its path,
// its values and the struct arrays around it (innermost first), all of
// the same rows; with one, the top-level chunk and the path to the leaf.
type leafCol struct {
	vals    arrow.Array
	parents []arrow.Array
	top     arrow.Array
	path    []step
}

// splitLeaves returns the leaves of a chunk of type dt in pre-order. a is
// nil below a list (its rows are not the chunk's).
func splitLeaves(dt arrow.DataType, a, top arrow.Array, parents []arrow.Array, path []step) []leafCol {
	switch t := dt.(type) {
	case *arrow.StructType:
		var out []leafCol
		for k := range t.NumFields() {
			var child arrow.Array
			if a != nil {
				child = a.(*array.Struct).Field(k)
			}
			ps := append([]arrow.Array{a}, parents...)
			out = append(out, splitLeaves(t.Field(k).Type, child, top, ps, append(slices.Clone(path), step{child: k}))...)
		}
		return out
	case *arrow.ListType:
		return splitLeaves(t.Elem(), nil, top, nil, append(slices.Clone(path), step{list: true}))
	case *arrow.LargeListType:
		return splitLeaves(t.Elem(), nil, top, nil, append(slices.Clone(path), step{list: true}))
	case *arrow.MapType: // a list of its entries, as Lance stores it
		return splitLeaves(t.Elem(), nil, top, nil, append(slices.Clone(path), step{list: true}))
	}
	if a == nil {
		return []leafCol{{top: top, path: path}}
	}
	return []leafCol{{vals: a, parents: parents}}
}

// Page is one encoded page of format 2.1 or 2.2: its buffers, row count
// and layout.
type Page struct {
	Bufs   [][]byte
	Length uint64
	Layout *encodings21pb.PageLayout
	// scratch are the buffers of Bufs that Recycle gives back.
	scratch [][]byte
}

// Recycle gives the page's buffers back for later pages to reuse, once
// they are written: neither Bufs nor anything sliced from them may be
// used after.
func (p *Page) Recycle() {
	putScratch(p.scratch...)
	p.Bufs, p.scratch = nil, nil
}

// EncodeField encodes chunks of one top-level field of type dt as one
// mini-block page per leaf column, starting at column col, calling emit
// for each; it returns the next column. leaves is dt's number of leaf
// columns (a packed struct is one), the empty pages written when there
// are no chunks. st is what the field's earlier pages in the same file
// leave to the next ones (nil: nothing).
func EncodeField(dt arrow.DataType, chunks []arrow.Array, leaves, col int, minor uint16, st *FieldState, emit func(col int, p Page) error) (int, error) {
	if _, ok := dt.(*arrow.DictionaryType); ok && len(chunks) > 0 {
		return col + 1, encodeDictionary(chunks, col, minor, emit)
	}
	var perLeaf [][]leafCol
	for _, c := range chunks {
		ls := splitLeaves(dt, c, c, nil, nil)
		if perLeaf == nil {
			perLeaf = make([][]leafCol, len(ls))
		}
		for i, l := range ls {
			perLeaf[i] = append(perLeaf[i], l)
		}
	}
	if perLeaf == nil { // no rows: one empty page per leaf
		perLeaf = make([][]leafCol, leaves)
	}
	for i, leaf := range perLeaf {
		p, err := encodeLeaf21(leaf, minor, nil, st.leaf(i))
		if err != nil {
			return 0, err
		}
		if err := emit(col, p); err != nil {
			return 0, err
		}
		col++
	}
	return col, nil
}

// FieldState is what the pages of one field in one file share: per leaf
// column, the FSST symbol table its last pages were compressed with (see
// fsstHistory). A nil *FieldState shares nothing.
type FieldState struct {
	fsst []*fsstHistory
}

// leaf returns the FSST history of the field's leaf i (nil for a nil s).
func (s *FieldState) leaf(i int) *fsstHistory {
	if s == nil {
		return nil
	}
	for len(s.fsst) <= i {
		s.fsst = append(s.fsst, new(fsstHistory))
	}
	return s.fsst[i]
}

// leafLevels returns the rep/def layers of a leaf and its definition
// levels (nil when nothing is null).
func leafLevels(leaf []leafCol) ([]encodings21pb.RepDefLayer, []uint16) {
	if len(leaf) == 0 {
		return []encodings21pb.RepDefLayer{encodings21pb.RepDefLayer_REPDEF_ALL_VALID_ITEM}, nil
	}
	depth := 1 + len(leaf[0].parents)
	nullable := make([]bool, depth)
	rows := 0
	for _, l := range leaf {
		rows += l.vals.Len()
		nullable[0] = nullable[0] || l.vals.NullN() > 0
		for i, p := range l.parents {
			nullable[i+1] = nullable[i+1] || p.NullN() > 0
		}
	}
	layers := make([]encodings21pb.RepDefLayer, depth)
	level := make([]uint16, depth) // definition level of a null at each layer
	var next uint16
	any := false
	for i, n := range nullable {
		layers[i] = encodings21pb.RepDefLayer_REPDEF_ALL_VALID_ITEM
		if n {
			layers[i] = encodings21pb.RepDefLayer_REPDEF_NULLABLE_ITEM
			next++
			level[i] = next
			any = true
		}
	}
	if !any {
		return layers, nil
	}
	def := make([]uint16, 0, rows)
	for _, l := range leaf {
		arrays := append([]arrow.Array{l.vals}, l.parents...)
		for j := range l.vals.Len() {
			var d uint16
			for i, a := range arrays {
				if nullable[i] && a.IsNull(j) {
					d = level[i] // the outermost null wins
				}
			}
			def = append(def, d)
		}
	}
	return layers, def
}

// chunker yields a page's values chunk by chunk.
type chunker interface {
	// next returns how many of the values from first the next chunk
	// takes (a power of two unless it takes all the rest).
	next(first int) int
	// appendChunk appends the chunk's value buffer to dst, which is
	// 8-byte aligned at its end, and returns it (encoded in place: a
	// buffer of its own copied into the page cost 3% of an append's CPU).
	appendChunk(dst []byte, first, n int) []byte
	// sizeHint is about the bytes of every chunk's buffer.
	sizeHint() int
}

// encodeLeaf21 encodes one leaf's chunks as a mini-block page. Format
// 2.2 requires its "large chunk" grammar: 32-bit chunk metadata words and
// value buffer sizes, flagged by MiniBlockLayout field 10.
func encodeLeaf21(leaf []leafCol, minor uint16, dict *pageDict, h *fsstHistory) (Page, error) {
	var (
		layers   []encodings21pb.RepDefLayer
		rep, def []uint16
		vals     []arrow.Array
		maxRep   uint16
		rows     int
	)
	if len(leaf) > 0 && leaf[0].top != nil {
		sh := shredLists(leaf)
		defer ReleaseAll(sh.vals)
		layers, rep, def, vals, maxRep = sh.layers, sh.rep, sh.def, sh.vals, sh.maxRep
		for _, v := range vals {
			rows += v.Len()
		}
	} else {
		layers, def = leafLevels(leaf)
		vals = make([]arrow.Array, len(leaf))
		for i, l := range leaf {
			vals[i] = l.vals
			rows += l.vals.Len()
		}
	}
	topRows := 0
	for _, l := range leaf {
		if l.top != nil {
			topRows += l.top.Len()
		} else {
			topRows += l.vals.Len()
		}
	}
	var dt arrow.DataType = arrow.Null
	if len(vals) > 0 {
		dt = vals[0].DataType()
	}
	pv, err := newChunker(dt, vals, rows, h)
	if err != nil {
		return Page{}, err
	}
	defer putScratch(pv.scratch...) // the page's values, copied into its chunks
	if pv.zip != nil {
		return encodeFullZip(pv.zip, layers, rep, def, maxRep, topRows), nil
	}
	c, enc := pv.c, pv.enc
	if pv.dict != nil {
		dict = pv.dict
	}
	m := &encodings21pb.MiniBlockLayout{
		ValueCompression: enc,
		Layers:           layers,
		NumBuffers:       1,
		NumItems:         uint64(rows),
	}
	large := minor >= 2
	if large {
		m.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, miniBlockLarge, protowire.VarintType), 1))
	}
	levelBits := func(max uint16) *encodings21pb.CompressiveEncoding {
		return &encodings21pb.CompressiveEncoding{Compression: &encodings21pb.CompressiveEncoding_OutOfLineBitpacking{
			OutOfLineBitpacking: &encodings21pb.OutOfLineBitpacking{UncompressedBitsPerValue: 16, Values: flatEncoding(bits.Len16(max))}}}
	}
	if def != nil {
		m.DefCompression = levelBits(maxDefLevel(layers))
	}
	if rep != nil {
		m.RepCompression = levelBits(maxRep)
		m.RepetitionIndexDepth = 1
	}
	layout := &encodings21pb.PageLayout{Layout: &encodings21pb.PageLayout_MiniBlockLayout{MiniBlockLayout: m}}
	if rows == 0 {
		if rep == nil && def == nil {
			return Page{Bufs: [][]byte{{}, {}}, Layout: layout}, nil
		}
		// Only empty and null lists: the levels alone, unpacked. The item
		// layer is nullable (an all-valid one would read as a constant
		// page), which shifts the other definition levels up by one.
		if layers[0] == encodings21pb.RepDefLayer_REPDEF_ALL_VALID_ITEM {
			layers[0] = encodings21pb.RepDefLayer_REPDEF_NULLABLE_ITEM
			for i := range def {
				def[i]++
			}
		}
		raw := func(l []uint16) []byte {
			var b []byte
			for _, v := range l {
				b = binary.LittleEndian.AppendUint16(b, v)
			}
			return b
		}
		return Page{Length: uint64(topRows), Bufs: [][]byte{raw(rep), raw(def)}, Layout: &encodings21pb.PageLayout{
			Layout: &encodings21pb.PageLayout_AllNullLayout{AllNullLayout: &encodings21pb.AllNullLayout{Layers: layers}}}}, nil
	}
	cw := &chunkWriter{c: c, rep: rep, def: def, repBits: bits.Len16(maxRep), defBits: bits.Len16(maxDefLevel(layers)), large: large,
		data: getScratch(c.sizeHint() + len(rep)/2 + len(def)/2 + 64)}
	var (
		meta     []byte
		repIndex []uint64 // per chunk: rows finishing in it, leftover levels
		lc       int      // levels consumed
		levels   = max(len(rep), len(def))
		ends     = valueEnds(rep, def, visibleDef(layers), rows)
	)
	for first := 0; first < rows; {
		// A chunk takes what the chunker offers, halved until its levels
		// fit too (many empty or null lists around its values); a page
		// whose levels overflow even a chunk of two values is full-zipped.
		n := c.next(first)
		var end, size int
		for {
			end = levels
			if first+n < rows && levels > 0 {
				end = ends[first+n-1]
			}
			var ok bool
			if size, ok = cw.chunk(first, n, lc, end); ok {
				break
			}
			if n <= 2 {
				putScratch(cw.data)
				z, err := zipValues(dt, vals, rows)
				if err != nil {
					return Page{}, err
				}
				return encodeFullZip(z, layers, rep, def, maxRep, topRows), nil
			}
			n = 1 << (bits.Len(uint(n-1)) - 1) // the power of two below n
		}
		last := first+n == rows
		if rep != nil {
			repIndex = appendRepIndex(repIndex, rep[lc:end], maxRep, len(meta) == 0, last)
		}
		log := 0
		if !last {
			log = bits.TrailingZeros(uint(n))
		}
		if word := uint32((size/8-1)<<4 | log); large {
			meta = binary.LittleEndian.AppendUint32(meta, word)
		} else {
			meta = binary.LittleEndian.AppendUint16(meta, uint16(word))
		}
		first += n
		lc = end
	}
	bufs := [][]byte{meta, cw.data}
	if dict != nil {
		if large {
			dict = dict.lz4()
		}
		m.Dictionary, m.NumDictionaryItems = dict.enc, uint64(dict.n)
		bufs = append(bufs, dict.buf)
	}
	if rep != nil {
		var b []byte
		for _, v := range repIndex {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		bufs = append(bufs, b)
	}
	return Page{Length: uint64(topRows), Bufs: bufs, Layout: layout, scratch: [][]byte{cw.data}}, nil
}

// valueEnds returns, per value of a page with levels, the index just
// after its level (nil without levels): a chunk ending with value i takes
// the levels before ends[i] (any empty or null lists after it go with the
// next chunk).
func valueEnds(rep, def []uint16, maxVisible uint16, rows int) []int {
	levels := max(len(rep), len(def))
	if levels == 0 {
		return nil
	}
	ends := make([]int, 0, rows)
	for i := range levels {
		if def == nil || def[i] <= maxVisible {
			ends = append(ends, i+1)
		}
	}
	return ends
}

// maxChunk is the largest mini-block chunk (format 2.1's 12-bit count of
// 8-byte words; 2.2 readers take it too).
const maxChunk = 32 << 10

// chunkWriter appends mini-block chunks to data.
type chunkWriter struct {
	c                chunker
	rep, def         []uint16
	repBits, defBits int
	large            bool
	data             []byte
}

// chunk appends the chunk of values [first, first+n) and levels [lc, end):
// the level count and the sizes of its rep and def buffers (16 bits each)
// and of its value buffer (16 bits, 32 in 2.2's large chunks), padding to
// 8 bytes, then each buffer padded to 8 bytes. It returns the chunk's
// size, or false (appending nothing) when the chunk exceeds a limit.
func (w *chunkWriter) chunk(first, n, lc, end int) (int, bool) {
	if end-lc > 0xffff {
		return 0, false
	}
	var repBuf, defBuf []byte
	if w.rep != nil {
		if repBuf = packLevels(w.rep[lc:end], w.repBits); len(repBuf) > 0xffff {
			return 0, false
		}
	}
	if w.def != nil {
		if defBuf = packLevels(w.def[lc:end], w.defBits); len(defBuf) > 0xffff {
			return 0, false
		}
	}
	start := len(w.data)
	data := binary.LittleEndian.AppendUint16(w.data, uint16(end-lc))
	if w.rep != nil {
		data = binary.LittleEndian.AppendUint16(data, uint16(len(repBuf)))
	}
	if w.def != nil {
		data = binary.LittleEndian.AppendUint16(data, uint16(len(defBuf)))
	}
	sizeAt := len(data) // the value buffer's size, written once known
	if w.large {
		data = binary.LittleEndian.AppendUint32(data, 0)
	} else {
		data = binary.LittleEndian.AppendUint16(data, 0)
	}
	data = padTo8(data)
	if w.rep != nil {
		data = padTo8(append(data, repBuf...))
	}
	if w.def != nil {
		data = padTo8(append(data, defBuf...))
	}
	vbAt := len(data)
	data = w.c.appendChunk(data, first, n)
	vb := len(data) - vbAt
	if w.large {
		binary.LittleEndian.PutUint32(data[sizeAt:], uint32(vb))
	} else {
		binary.LittleEndian.PutUint16(data[sizeAt:], uint16(vb))
	}
	data = padTo8(data)
	// A 2.1 chunk's 16-bit value size cannot overflow: maxChunk is less.
	if size := len(data) - start; size > maxChunk {
		w.data = data[:start]
		return 0, false
	}
	w.data = data
	return len(data) - start, true
}

// maxDefLevel is the highest definition level of a page's layers.
func maxDefLevel(layers []encodings21pb.RepDefLayer) uint16 {
	var n uint16
	for _, l := range layers {
		switch l {
		case encodings21pb.RepDefLayer_REPDEF_NULLABLE_ITEM, encodings21pb.RepDefLayer_REPDEF_NULLABLE_LIST, encodings21pb.RepDefLayer_REPDEF_EMPTYABLE_LIST:
			n++
		case encodings21pb.RepDefLayer_REPDEF_NULL_AND_EMPTY_LIST:
			n += 2
		}
	}
	return n
}

// appendRepIndex appends a chunk's repetition index entry (Lance's
// depth-1 index): the rows that finish in it and the levels left over
// after its last row start (0 for the last chunk, which finishes its last
// row). A chunk starting a row finishes the previous chunk's leftover
// row.
func appendRepIndex(idx []uint64, rep []uint16, maxRep uint16, first, last bool) []uint64 {
	var rows, left uint64
	for i := 1; i < len(rep); i++ {
		if rep[i] == maxRep {
			rows++
		}
	}
	if !last {
		left = uint64(len(rep))
		for i := len(rep) - 1; i >= 0; i-- {
			if rep[i] == maxRep {
				left = uint64(len(rep) - i)
				break
			}
		}
	} else {
		rows++
	}
	if !first && len(rep) > 0 && rep[0] == maxRep && idx[len(idx)-1] != 0 {
		idx[len(idx)-2]++
		idx[len(idx)-1] = 0
	}
	return append(idx, rows, left)
}

func padTo8(b []byte) []byte {
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	return b
}

// packLevels bit-packs 16-bit levels out of line at w bits: whole blocks
// of 1024, the tail packed (padded) only when that is smaller than raw.
func packLevels(levels []uint16, w int) []byte {
	words := flWords(16, w)
	var out []byte
	blk := make([]uint16, words)
	for i := 0; i < len(levels); i += flBlock {
		n := min(flBlock, len(levels)-i)
		if n < flBlock && words >= n {
			for _, l := range levels[i:] {
				out = binary.LittleEndian.AppendUint16(out, l)
			}
			break
		}
		in := levels[i : i+n]
		if n < flBlock {
			in = make([]uint16, flBlock)
			copy(in, levels[i:])
		}
		flPack(w, in, blk)
		out = append(out, bytesOf(blk)...)
	}
	return out
}

// pageValues is how a page stores its values: in mini-block chunks (c,
// their encoding enc, and the dictionary the chunks index into, if any),
// or zipped.
type pageValues struct {
	c    chunker
	enc  *encodings21pb.CompressiveEncoding
	dict *pageDict
	zip  *zipped
	// scratch are the gathered values c reads, recycled once the page's
	// chunks are written.
	scratch [][]byte
}

// newChunker picks the compressive encoding of a page of values: zipped
// when they are too wide for mini-block chunks, dictionary indices when
// few distinct strings repeat. h is the column's FSST history (nil: none).
func newChunker(dt arrow.DataType, vals []arrow.Array, rows int, h *fsstHistory) (pageValues, error) {
	switch t := dt.(type) {
	case *arrow.NullType:
		return pageValues{enc: flatEncoding(8)}, nil
	case *arrow.BooleanType:
		b, _ := FixedValues(dt, vals)
		return pageValues{c: &flatChunker{data: b, bits: 1, rows: rows}, enc: flatEncoding(1)}, nil
	case *arrow.FixedSizeListType:
		b, ew, err := vectorValues(t, vals)
		if err != nil {
			return pageValues{}, err
		}
		bits := ew.BitWidth() * int(t.Len())
		if bits/8 > maxMiniValue {
			return pageValues{zip: &zipped{n: rows, width: bits / 8, data: b, enc: fslEncoding(t, ew)}}, nil
		}
		return pageValues{c: &flatChunker{data: b, bits: bits, rows: rows}, enc: fslEncoding(t, ew)}, nil
	case arrow.BinaryDataType:
		// A dictionary is decided, and built, from the chunks' own bytes:
		// the page's values are gathered only when it is not one.
		if ps := pageStringsOf(vals); ps.widest <= maxMiniValue {
			if idx, dict := dictionaryEncode(dt, ps); dict != nil {
				pv := intValues(idx, 32, rows)
				pv.dict = dict
				pv.scratch = [][]byte{idx}
				return pv, nil
			}
		}
		offs, data, widest := varValues(vals, rows, getScratch)
		if widest > maxMiniValue {
			z, err := zipVariable(dt, offs, data)
			return pageValues{zip: z}, err
		}
		c, enc := newVarChunker(offs, data, widest, h)
		pv := pageValues{c: c, enc: enc, scratch: [][]byte{data}}
		if enc.GetFsst() != nil { // c holds the codes, not data
			pv.scratch = append(pv.scratch, c.data)
		}
		return pv, nil
	case arrow.FixedWidthDataType:
		b, _ := fixedValues(dt, vals, getScratch)
		if bitPackable(dt) {
			pv := intValues(b, t.BitWidth(), rows)
			pv.scratch = [][]byte{b}
			return pv, nil
		}
		return pageValues{c: &flatChunker{data: b, bits: t.BitWidth(), rows: rows}, enc: flatEncoding(t.BitWidth()), scratch: [][]byte{b}}, nil
	}
	return pageValues{}, writers.Errorf(writers.ErrInvalid, "lance: type %s is not written in Lance file formats 2.1 and 2.2 by Quiver", dt)
}

// intValues stores rows w-bit integers bit-packed, or flat when packing
// does not make them smaller.
func intValues(b []byte, w, rows int) pageValues {
	switch w {
	case 8:
		return packedValues(wordsOf[uint8](b)[:rows])
	case 16:
		return packedValues(wordsOf[uint16](b)[:rows])
	case 32:
		return packedValues(wordsOf[uint32](b)[:rows])
	}
	return packedValues(wordsOf[uint64](b)[:rows])
}

func packedValues[T flWord](vals []T) pageValues {
	t := flBits[T]()
	widths := blockWidths(vals)
	packed := 0
	for _, bw := range widths {
		packed += t/8 + flWords(t, int(bw))*t/8
	}
	if packed < len(vals)*t/8 {
		return pageValues{c: &packChunker[T]{vals: vals, widths: widths}, enc: &encodings21pb.CompressiveEncoding{Compression: &encodings21pb.CompressiveEncoding_InlineBitpacking{
			InlineBitpacking: &encodings21pb.InlineBitpacking{UncompressedBitsPerValue: uint64(t)}}}}
	}
	return pageValues{c: &flatChunker{data: bytesOf(vals), bits: t, rows: len(vals)}, enc: flatEncoding(t)}
}

func flatEncoding(bits int) *encodings21pb.CompressiveEncoding {
	return &encodings21pb.CompressiveEncoding{Compression: &encodings21pb.CompressiveEncoding_Flat{Flat: &encodings21pb.Flat{BitsPerValue: uint64(bits)}}}
}

func variableEncoding(offsetBits int) *encodings21pb.CompressiveEncoding {
	return &encodings21pb.CompressiveEncoding{Compression: &encodings21pb.CompressiveEncoding_Variable{Variable: &encodings21pb.Variable{
		Offsets: flatEncoding(offsetBits)}}}
}

func fslEncoding(t *arrow.FixedSizeListType, ew arrow.FixedWidthDataType) *encodings21pb.CompressiveEncoding {
	return &encodings21pb.CompressiveEncoding{Compression: &encodings21pb.CompressiveEncoding_FixedSizeList{
		FixedSizeList: &encodings21pb.FixedSizeList{ItemsPerValue: uint64(t.Len()), Values: flatEncoding(ew.BitWidth())}}}
}

// vectorValues returns the item bytes of fixed-size lists of a
// fixed-width type, which must have no null items in a valid list.
func vectorValues(t *arrow.FixedSizeListType, vals []arrow.Array) ([]byte, arrow.FixedWidthDataType, error) {
	ew, ok := t.Elem().(arrow.FixedWidthDataType)
	if !ok || t.Elem().ID() == arrow.BOOL {
		return nil, nil, writers.Errorf(writers.ErrInvalid, "lance: type %s is not written in Lance file formats 2.1 and 2.2 by Quiver", t)
	}
	items := FSLItems(vals)
	defer ReleaseAll(items)
	for k, it := range items {
		if nullItems(vals[k], it, int(t.Len())) {
			return nil, nil, writers.Errorf(writers.ErrInvalid, "lance: a fixed_size_list value has null items, which Quiver does not write in Lance file formats 2.1 and 2.2: null the whole vector instead, or write the dataset with data_storage_version \"2.0\"")
		}
	}
	b, _ := FixedValues(t.Elem(), items)
	return b, ew, nil
}

// nullItems reports whether a valid row of fixed-size list l has a null
// item (a null row's items do not matter).
func nullItems(l, items arrow.Array, dim int) bool {
	if items.NullN() == 0 {
		return false
	}
	for i := range l.Len() {
		if l.IsValid(i) {
			for j := i * dim; j < (i+1)*dim; j++ {
				if items.IsNull(j) {
					return true
				}
			}
		}
	}
	return false
}

// blockWidths returns, per block of 1024 values, the bits of its widest.
func blockWidths[T flWord](vals []T) []uint8 {
	out := make([]uint8, (len(vals)+flBlock-1)/flBlock)
	for k := range out {
		blk := vals[k*flBlock : min(len(vals), (k+1)*flBlock)]
		// Four accumulators: one would make every value wait for the
		// last one's or.
		var or0, or1, or2, or3 T
		for len(blk) >= 4 {
			or0, or1, or2, or3 = or0|blk[0], or1|blk[1], or2|blk[2], or3|blk[3]
			blk = blk[4:]
		}
		for _, v := range blk {
			or0 |= v
		}
		out[k] = uint8(bits.Len64(uint64(or0 | or1 | or2 | or3)))
	}
	return out
}

// bitPackable reports types of 8 to 64 bits that are bit-packed when
// that is smaller: integers, and floats by their bits, as pylance does
// (positive floats below 2 lose their sign bit and more).
func bitPackable(dt arrow.DataType) bool {
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.DATE32, arrow.DATE64, arrow.TIMESTAMP, arrow.TIME32, arrow.TIME64, arrow.DURATION,
		arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
		return true
	}
	return false
}

// flatChunker stores fixed-width values as they are, about chunkAim
// bytes per chunk.
type flatChunker struct {
	data []byte
	bits int
	rows int
}

func (c *flatChunker) next(first int) int {
	n := 4096
	for n > 2 && n*c.bits/8 > chunkAim {
		n /= 2
	}
	return min(n, c.rows-first)
}

func (c *flatChunker) sizeHint() int { return len(c.data) + c.rows/64*16 }

func (c *flatChunker) appendChunk(dst []byte, first, n int) []byte {
	if c.bits == 1 {
		w := BitWriter{b: dst, n: 8 * len(dst)}
		w.AppendBits(c.data, first, n)
		return w.b
	}
	return append(dst, c.data[first*c.bits/8:(first+n)*c.bits/8]...)
}

// packChunker bit-packs integers of T in FastLanes blocks of 1024, each
// led by its bit width (the chunk's widest value).
type packChunker[T flWord] struct {
	vals   []T
	widths []uint8 // per block of 1024 values (blockWidths)
	tail   []T     // a block cut short, zero-padded to 1024
}

func (c *packChunker[T]) next(first int) int { return min(flBlock, len(c.vals)-first) }

func (c *packChunker[T]) sizeHint() int { return len(bytesOf(c.vals)) }

func (c *packChunker[T]) appendChunk(dst []byte, first, n int) []byte {
	t := flBits[T]()
	in := c.vals[first : first+n]
	var w int
	if first%flBlock == 0 && (n == flBlock || first+n == len(c.vals)) {
		w = int(c.widths[first/flBlock])
	} else { // a chunk cut short for its levels
		var or T
		for _, v := range in {
			or |= v
		}
		w = bits.Len64(uint64(or))
	}
	if n < flBlock {
		if c.tail == nil {
			c.tail = make([]T, flBlock)
		}
		copy(c.tail, in)
		clear(c.tail[n:])
		in = c.tail
	}
	dst, b := grow(dst, (1+flWords(t, w))*t/8)
	out := wordsOf[T](b)
	out[0] = T(w)
	flPack(w, in, out[1:])
	return dst
}

// varChunker stores variable-width values as chunk-relative 32-bit
// offsets and bytes.
type varChunker struct {
	offs []uint64 // page-relative, len rows+1
	data []byte
}

// varValues gathers variable-width values: page-relative offsets (rows+1),
// the bytes (null values empty, copied into alloc(size), never the chunks'
// own memory) and the widest value's length.
func varValues(vals []arrow.Array, rows int, alloc func(int) []byte) ([]uint64, []byte, int64) {
	total := 0
	for _, a := range vals {
		off, _ := BinaryChunk(a)
		total += int(off(a.Len()) - off(0))
	}
	offs, data := make([]uint64, 1, rows+1), alloc(total)
	var widest int64
	for _, a := range vals {
		off, raw := BinaryChunk(a)
		if a.NullN() == 0 { // contiguous: one copy, offsets rebased
			base, end := off(0), off(a.Len())
			at := uint64(len(data)) - uint64(base)
			data = append(data, raw[base:end]...)
			var w int64
			if o32, o64 := valueOffsets(a); o32 != nil {
				offs, w = rebased(offs, o32, at)
			} else {
				offs, w = rebased(offs, o64, at)
			}
			widest = max(widest, w)
			continue
		}
		for i := range a.Len() {
			if a.IsValid(i) {
				widest = max(widest, off(i+1)-off(i))
				data = append(data, raw[off(i):off(i+1)]...)
			}
			offs = append(offs, uint64(len(data)))
		}
	}
	return offs, data, widest
}

// valueOffsets returns the offsets of a's values, int32 (string, binary)
// or int64 (large string, large binary).
func valueOffsets(a arrow.Array) ([]int32, []int64) {
	switch a := a.(type) {
	case *array.String:
		return a.ValueOffsets(), nil
	case *array.Binary:
		return a.ValueOffsets(), nil
	case *array.LargeString:
		return nil, a.ValueOffsets()
	case *array.LargeBinary:
		return nil, a.ValueOffsets()
	}
	panic("lance: valueOffsets of " + a.DataType().String())
}

// rebased appends the offsets o[1:], shifted by at, to offs, and returns
// them with the widest value's length: one loop over a slice, where a call
// per offset cost 7% of an append's CPU.
func rebased[T int32 | int64](offs []uint64, o []T, at uint64) ([]uint64, int64) {
	var widest T
	for i := 1; i < len(o); i++ {
		widest = max(widest, o[i]-o[i-1])
		offs = append(offs, uint64(o[i])+at)
	}
	return offs, int64(widest)
}

// newVarChunker stores variable-width values as pylance does: FSST-
// compressed when the page holds 32 KiB or more and a value of 5 bytes or
// more (unless that does not shrink them: random bytes), else as they are.
func newVarChunker(offs []uint64, data []byte, widest int64, h *fsstHistory) (*varChunker, *encodings21pb.CompressiveEncoding) {
	if len(data) >= fsstMinBytes && widest >= fsstMinWidest {
		if cOffs, codes, table, ok := fsstCompress(offs, data, h); ok {
			return &varChunker{offs: cOffs, data: codes}, &encodings21pb.CompressiveEncoding{Compression: &encodings21pb.CompressiveEncoding_Fsst{
				Fsst: &encodings21pb.Fsst{Values: variableEncoding(32), SymbolTable: table}}}
		}
	}
	return &varChunker{offs: offs, data: data}, variableEncoding(32)
}

func (c *varChunker) next(first int) int {
	rows := len(c.offs) - 1
	size := func(n int) uint64 { return c.offs[first+n] - c.offs[first] + uint64(4*(n+1)) }
	if size(rows-first) <= 2*chunkAim && rows-first <= 4096 {
		return rows - first
	}
	n := 2
	for n*2 <= 4096 && first+n*2 <= rows && size(n*2) <= chunkAim {
		n *= 2
	}
	return min(n, rows-first)
}

func (c *varChunker) sizeHint() int { return len(c.data) + 4*len(c.offs) }

func (c *varChunker) appendChunk(dst []byte, first, n int) []byte {
	base := c.offs[first]
	hdr := uint64(4 * (n + 1))
	dst, b := grow(dst, int(hdr))
	for i := range n + 1 {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(hdr+c.offs[first+i]-base))
	}
	dst = append(dst, c.data[base:c.offs[first+n]]...)
	// Readers view the chunk as 32-bit words: pad it to a multiple of 4.
	for len(dst)%4 != 0 {
		dst = append(dst, 0)
	}
	return dst
}

// grow extends b by n bytes, returning it and the n bytes, to be written:
// when b had room, they hold whatever its memory held.
func grow(b []byte, n int) (grown, added []byte) {
	at := len(b)
	b = slices.Grow(b, n)[:at+n]
	return b, b[at:]
}

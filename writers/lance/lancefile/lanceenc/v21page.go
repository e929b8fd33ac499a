package lanceenc

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// Structural layouts of Lance 2.1 and 2.2 pages: each decodes a page of
// one leaf column into its repetition and definition levels and its
// values (one per visible item), which levels.go assembles into Arrow.

// LeafPage is one decoded page of a leaf column.
type LeafPage struct {
	layers   []encodings21pb.RepDefLayer // innermost first
	rep, def []uint16                    // one per level; nil when absent
	vals     block                       // one value per visible item
	// constant: vals holds one value that every valid item repeats.
	constant bool
	// allNull: there are no values, every item is null.
	allNull bool
}

// miniBlockLarge is MiniBlockLayout's field 10 (2.2): chunk metadata
// words are 32 bits instead of 16. The vendored protos predate it, so it
// is read from the message's unknown fields.
const miniBlockLarge protowire.Number = 10

func largeChunks(m *encodings21pb.MiniBlockLayout) bool {
	b := m.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if num == miniBlockLarge && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(b)
			return m > 0 && v != 0
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return false
		}
		b = b[m:]
	}
	return false
}

func pad8(n int) int { return (n + 7) &^ 7 }

// DecodePage decodes page p's buffers into levels and values.
func DecodePage(bud *Budget, pl *encodings21pb.PageLayout, bufs [][]byte, rows uint64) (*LeafPage, error) {
	switch l := pl.GetLayout().(type) {
	case *encodings21pb.PageLayout_MiniBlockLayout:
		return decodeMiniBlock(bud, l.MiniBlockLayout, bufs)
	case *encodings21pb.PageLayout_FullZipLayout:
		return decodeFullZip(bud, l.FullZipLayout, bufs)
	case *encodings21pb.PageLayout_AllNullLayout:
		return decodeAllNull(bud, l.AllNullLayout.Layers, bufs, rows)
	}
	return nil, fmt.Errorf("page layout %T is not supported by this reader", pl.GetLayout())
}

func decodeMiniBlock(bud *Budget, m *encodings21pb.MiniBlockLayout, bufs [][]byte) (*LeafPage, error) {
	if len(bufs) < 2 || m.NumBuffers == 0 || m.NumBuffers > 16 {
		return nil, fmt.Errorf("mini-block page with %d buffers (%d per chunk)", len(bufs), m.NumBuffers)
	}
	if m.NumItems > MaxPageRows {
		return nil, fmt.Errorf("mini-block page of %d items exceeds the reader's limit", m.NumItems)
	}
	meta, data := bufs[0], bufs[1]
	word := 2
	if largeChunks(m) {
		word = 4
	}
	p := &LeafPage{layers: m.Layers}
	hasRep, hasDef := m.RepCompression != nil, m.DefCompression != nil
	var vals []block
	// Bit-packed integers (ids, the common case) are unpacked straight
	// into the page's values, not chunk by chunk and then joined.
	var into []byte
	t := 0
	if bp := m.ValueCompression.GetInlineBitpacking(); bp != nil && m.Dictionary == nil {
		switch t = int(bp.UncompressedBitsPerValue); t {
		case 8, 16, 32, 64:
			if err := bud.SpendDecoded(uint64(m.NumItems) * uint64(t) / 8); err != nil {
				return nil, err
			}
			into = make([]byte, int(m.NumItems)*t/8)
		}
	}
	pos, seen := 0, 0
	for c := 0; c+word <= len(meta); c += word {
		w := uint64(binary.LittleEndian.Uint16(meta[c:]))
		if word == 4 {
			w = uint64(binary.LittleEndian.Uint32(meta[c:]))
		}
		size := int((w>>4)+1) * 8
		n := 1 << (w & 15)
		last := c+word >= len(meta)
		if last {
			n = int(m.NumItems) - seen
		}
		if n < 0 || (!last && w&15 == 0) || pos+size > len(data) || size < 0 {
			return nil, fmt.Errorf("mini-block chunk %d does not fit its page", c/word)
		}
		chunk := data[pos : pos+size]
		pos += size
		if into != nil && seen+n > int(m.NumItems) {
			return nil, fmt.Errorf("mini-block chunks hold more than the page's %d items", m.NumItems)
		}
		cbufs, err := chunkValues(bud, m, chunk, n, word, hasRep, hasDef, p)
		if err == nil && into != nil {
			err = inlineUnpackInto(into[seen*t/8:], t, first(cbufs), n)
		} else if err == nil {
			var v block
			v, err = decodeMini(bud, m.ValueCompression, cbufs, n, 0)
			vals = append(vals, v)
		}
		if err != nil {
			return nil, fmt.Errorf("mini-block chunk %d: %w", c/word, err)
		}
		seen += n
	}
	if seen != int(m.NumItems) {
		return nil, fmt.Errorf("mini-block chunks hold %d items, the page %d", seen, m.NumItems)
	}
	v := block{n: seen, bits: t, data: into}
	var err error
	if into == nil {
		if v, err = concatBlocks(vals); err != nil {
			return nil, err
		}
	}
	if m.Dictionary != nil {
		if v, err = dictionaryLookup(bud, m, bufs[2:], v); err != nil {
			return nil, err
		}
	}
	p.vals = v
	return p, nil
}

// chunkValues reads one chunk: its level count and the sizes of its rep
// and def buffers (16 bits each), the sizes of its value buffers (16 bits,
// or 32 in 2.2's large chunks: word), padding to 8 bytes, then each
// buffer padded to 8 bytes. The levels are appended to p; it returns the
// value buffers.
func chunkValues(bud *Budget, m *encodings21pb.MiniBlockLayout, chunk []byte, n, word int, hasRep, hasDef bool, p *LeafPage) ([][]byte, error) {
	nl := 0
	if hasRep {
		nl++
	}
	if hasDef {
		nl++
	}
	nb := nl + int(m.NumBuffers)
	hdr := 2 + 2*nl + word*int(m.NumBuffers)
	if len(chunk) < hdr {
		return nil, fmt.Errorf("chunk of %d bytes has no header", len(chunk))
	}
	levels := int(binary.LittleEndian.Uint16(chunk))
	sizes := make([]int, nb)
	at := 2
	for i := range sizes {
		if i < nl || word == 2 {
			sizes[i] = int(binary.LittleEndian.Uint16(chunk[at:]))
			at += 2
		} else {
			sizes[i] = int(binary.LittleEndian.Uint32(chunk[at:]))
			at += 4
		}
	}
	pos := pad8(hdr)
	bufs := make([][]byte, nb)
	for i, s := range sizes {
		if s > len(chunk)-pos {
			return nil, fmt.Errorf("chunk buffer %d of %d bytes ends outside the chunk", i, s)
		}
		bufs[i] = chunk[pos : pos+s]
		pos = pad8(pos + s)
	}
	if !hasRep && !hasDef {
		levels = 0
	}
	if hasRep {
		r, err := decodeLevels(bud, m.RepCompression, bufs[0], levels)
		if err != nil {
			return nil, fmt.Errorf("repetition levels: %w", err)
		}
		p.rep = append(p.rep, r...)
		bufs = bufs[1:]
	}
	if hasDef {
		d, err := decodeLevels(bud, m.DefCompression, bufs[0], levels)
		if err != nil {
			return nil, fmt.Errorf("definition levels: %w", err)
		}
		p.def = append(p.def, d...)
		bufs = bufs[1:]
	}
	return bufs, nil
}

func decodeLevels(bud *Budget, enc *encodings21pb.CompressiveEncoding, buf []byte, n int) ([]uint16, error) {
	b, err := decodeBlock(bud, enc, buf, n, 0)
	if err != nil {
		return nil, err
	}
	if b.bits != 16 || b.offs != nil {
		return nil, fmt.Errorf("levels of %d bits", b.bits)
	}
	out := make([]uint16, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b.data[2*i:])
	}
	return out, nil
}

// concatBlocks joins the chunks' values of one page.
func concatBlocks(bs []block) (block, error) {
	if len(bs) == 1 {
		return bs[0], nil
	}
	var out block
	if len(bs) == 0 {
		return out, nil
	}
	out.bits = bs[0].bits
	variable := bs[0].offs != nil
	// Sized once: the blocks' values are already in memory (bounded by the
	// page's budget), and growing by appends copied them over and over.
	var size, offs int
	for _, b := range bs {
		size += len(b.data)
		if len(b.offs) > 1 {
			offs += len(b.offs) - 1
		}
	}
	if variable {
		out.offs = make([]uint64, 1, 1+offs)
	}
	if out.bits != 1 || variable {
		out.data = make([]byte, 0, size)
	}
	var bw BitWriter
	for _, b := range bs {
		if (b.offs != nil) != variable || b.bits != out.bits {
			return block{}, fmt.Errorf("chunks of one page decode to different kinds of values")
		}
		switch {
		case variable:
			base := uint64(len(out.data))
			out.data = append(out.data, b.data...)
			for _, o := range b.offs[1:] {
				out.offs = append(out.offs, base+o)
			}
		case b.bits == 1:
			bw.AppendBits(b.data, 0, b.n)
		default:
			out.data = append(out.data, b.data...)
		}
		out.n += b.n
	}
	if out.bits == 1 && !variable {
		out.data = bw.b
	}
	return out, nil
}

// dictionaryLookup replaces indices by the dictionary's values.
func dictionaryLookup(bud *Budget, m *encodings21pb.MiniBlockLayout, rest [][]byte, idx block) (block, error) {
	if len(rest) == 0 || m.NumDictionaryItems > MaxPageRows {
		return block{}, fmt.Errorf("dictionary page without its dictionary buffer")
	}
	dict, err := decodeBlock(bud, m.Dictionary, rest[0], int(m.NumDictionaryItems), 0)
	if err != nil {
		return block{}, fmt.Errorf("dictionary: %w", err)
	}
	if dict.n == 0 && idx.n > 0 {
		return block{}, fmt.Errorf("dictionary page of %d values with an empty dictionary", idx.n)
	}
	if idx.offs != nil || (idx.bits != 8 && idx.bits != 16 && idx.bits != 32 && idx.bits != 64) {
		return block{}, fmt.Errorf("dictionary indices of %d bits", idx.bits)
	}
	at := func(i int) (uint64, error) {
		v := readWord(idx.data, idx.bits, i)
		if v >= uint64(dict.n) {
			// Null items may carry any index; they are masked later.
			return 0, nil
		}
		return v, nil
	}
	out := block{n: idx.n, bits: dict.bits}
	if dict.offs != nil {
		out.offs = make([]uint64, 1, idx.n+1)
		var total uint64
		for i := range idx.n {
			v, _ := at(i)
			total += dict.offs[v+1] - dict.offs[v]
		}
		if err := bud.SpendUnbacked(total, "a dictionary page"); err != nil {
			return block{}, err
		}
		out.data = make([]byte, 0, total)
		for i := range idx.n {
			v, _ := at(i)
			out.data = append(out.data, dict.data[dict.offs[v]:dict.offs[v+1]]...)
			out.offs = append(out.offs, uint64(len(out.data)))
		}
		return out, nil
	}
	if dict.bits%8 != 0 || dict.n == 0 {
		return block{}, fmt.Errorf("dictionary of %d-bit values", dict.bits)
	}
	bw := dict.bits / 8
	if err := bud.SpendUnbacked(uint64(idx.n)*uint64(bw), "a dictionary page"); err != nil {
		return block{}, err
	}
	out.data = make([]byte, idx.n*bw)
	for i := range idx.n {
		v, err := at(i)
		if err != nil {
			return block{}, err
		}
		copy(out.data[i*bw:], dict.data[int(v)*bw:int(v+1)*bw])
	}
	return out, nil
}

// decodeFullZip reads a page whose items are each a control word
// (repetition and definition bits), then, for a visible item, its value:
// fixed-width bytes, or a length and bytes (valid items only).
func decodeFullZip(bud *Budget, z *encodings21pb.FullZipLayout, bufs [][]byte) (*LeafPage, error) {
	if len(bufs) < 1 || z.NumItems > MaxPageRows || z.NumVisibleItems > z.NumItems {
		return nil, fmt.Errorf("full-zip page with %d buffers, %d items and %d visible", len(bufs), z.NumItems, z.NumVisibleItems)
	}
	data := bufs[0]
	p := &LeafPage{layers: z.Layers}
	if z.BitsRep+z.BitsDef > 32 {
		return nil, fmt.Errorf("full-zip control words of %d bits", z.BitsRep+z.BitsDef)
	}
	ctl := controlBytes(int(z.BitsRep + z.BitsDef))
	maxVisible := visibleDef(z.Layers)
	var (
		fixedBytes int
		lenBytes   int
		out        block
	)
	switch d := z.GetDetails().(type) {
	case *encodings21pb.FullZipLayout_BitsPerValue:
		if d.BitsPerValue == 0 || d.BitsPerValue%8 != 0 || d.BitsPerValue > maxValueBits {
			return nil, fmt.Errorf("full-zip values of %d bits", d.BitsPerValue)
		}
		fixedBytes = int(d.BitsPerValue / 8)
		out.bits = int(d.BitsPerValue)
	case *encodings21pb.FullZipLayout_BitsPerOffset:
		if d.BitsPerOffset != 32 && d.BitsPerOffset != 64 {
			return nil, fmt.Errorf("full-zip lengths of %d bits", d.BitsPerOffset)
		}
		lenBytes = int(d.BitsPerOffset / 8)
		out.offs = make([]uint64, 1, z.NumVisibleItems+1)
	default:
		return nil, fmt.Errorf("full-zip page without value width")
	}
	defMask := uint32(1)<<z.BitsDef - 1
	pos := 0
	for range z.NumItems {
		var w uint32
		if pos+ctl > len(data) {
			return nil, fmt.Errorf("full-zip data ends inside an item")
		}
		for i := range ctl {
			w |= uint32(data[pos+i]) << (8 * i)
		}
		pos += ctl
		rep, def := uint16(w>>z.BitsDef), uint16(w&defMask)
		if z.BitsRep > 0 {
			p.rep = append(p.rep, rep)
		}
		if z.BitsDef > 0 {
			p.def = append(p.def, def)
		}
		if def > maxVisible {
			continue
		}
		out.n++
		if fixedBytes > 0 {
			if pos+fixedBytes > len(data) {
				return nil, fmt.Errorf("full-zip data ends inside a value")
			}
			out.data = append(out.data, data[pos:pos+fixedBytes]...)
			pos += fixedBytes
			continue
		}
		if def == 0 {
			if pos+lenBytes > len(data) {
				return nil, fmt.Errorf("full-zip data ends inside a length")
			}
			n := readWord(data[pos:], lenBytes*8, 0)
			pos += lenBytes
			if n > uint64(len(data)-pos) {
				return nil, fmt.Errorf("full-zip value of %d bytes ends outside the page", n)
			}
			out.data = append(out.data, data[pos:pos+int(n)]...)
			pos += int(n)
		}
		out.offs = append(out.offs, uint64(len(out.data)))
	}
	vals, err := perValue(bud, z.ValueCompression, out, 0)
	if err != nil {
		return nil, err
	}
	p.vals = vals
	return p, nil
}

// perValue undoes a full-zip page's value compression, which applies to
// each value on its own.
func perValue(bud *Budget, enc *encodings21pb.CompressiveEncoding, b block, depth int) (block, error) {
	if err := checkDepth(depth); err != nil {
		return block{}, err
	}
	switch c := enc.GetCompression().(type) {
	case *encodings21pb.CompressiveEncoding_Flat:
		if b.offs != nil || c.Flat.BitsPerValue != uint64(b.bits) {
			return block{}, fmt.Errorf("full-zip flat values of %d bits, the layout says %d", c.Flat.BitsPerValue, b.bits)
		}
		return b, nil
	case *encodings21pb.CompressiveEncoding_Variable:
		if b.offs == nil {
			return block{}, fmt.Errorf("full-zip variable values without lengths")
		}
		return b, nil
	case *encodings21pb.CompressiveEncoding_Fsst:
		inner, err := perValue(bud, c.Fsst.Values, b, depth+1)
		if err != nil {
			return block{}, err
		}
		return fsstDecode(bud, c.Fsst.SymbolTable, inner)
	case *encodings21pb.CompressiveEncoding_General:
		// Each value compressed on its own (null values are empty).
		if b.offs == nil {
			return block{}, fmt.Errorf("full-zip general compression of fixed-width values")
		}
		out := block{n: b.n, offs: make([]uint64, 1, b.n+1)}
		var z zstdReader
		defer z.close()
		for i := range b.n {
			if v := b.data[b.offs[i]:b.offs[i+1]]; len(v) > 0 {
				raw, err := decompressWith(bud, c.General.GetCompression().GetScheme(), v, &z)
				if err != nil {
					return block{}, fmt.Errorf("full-zip value %d: %w", i, err)
				}
				out.data = append(out.data, raw...)
			}
			out.offs = append(out.offs, uint64(len(out.data)))
		}
		return perValue(bud, c.General.Values, out, depth+1)
	case *encodings21pb.CompressiveEncoding_VariablePackedStruct:
		// Whole rows, split by the struct's type (unpackVarStruct).
		if b.offs == nil {
			return block{}, fmt.Errorf("full-zip packed struct rows without lengths")
		}
		return b, checkVariablePacked(c.VariablePackedStruct, depth+1)
	case *encodings21pb.CompressiveEncoding_FixedSizeList:
		if b.offs != nil || c.FixedSizeList.HasValidity {
			return block{}, fmt.Errorf("full-zip fixed-size list values are not supported here")
		}
		return b, nil
	}
	return block{}, unsupported(enc)
}

// controlBytes is the size of a full-zip control word of bits (at most
// 32) bits of repetition and definition levels.
func controlBytes(bits int) int {
	switch {
	case bits == 0:
		return 0
	case bits <= 8:
		return 1
	case bits <= 16:
		return 2
	}
	return 4
}

// visibleDef is the highest definition level that still has an item
// slot (the levels of null items and null structs above them, below the
// first list layer).
func visibleDef(layers []encodings21pb.RepDefLayer) uint16 {
	var n uint16
	for _, l := range layers {
		switch l {
		case encodings21pb.RepDefLayer_REPDEF_NULLABLE_ITEM:
			n++
		case encodings21pb.RepDefLayer_REPDEF_ALL_VALID_ITEM:
		default:
			return n
		}
	}
	return n
}

// decodeAllNull reads an all-null page: no buffers (every row null), or
// raw 16-bit repetition and definition levels. Format 2.2 also stores
// constant pages in this layout: the value, then the levels, if any.
func decodeAllNull(bud *Budget, layers []encodings21pb.RepDefLayer, bufs [][]byte, rows uint64) (*LeafPage, error) {
	p := &LeafPage{layers: layers, allNull: true}
	// All-null pages have no buffers or the two of their levels; constant
	// pages add the value in front.
	if len(bufs)%2 == 1 {
		p.allNull = false
		if len(bufs) == 0 {
			return nil, fmt.Errorf("constant page without its value")
		}
		v, err := constantValue(bufs[0])
		if err != nil {
			return nil, err
		}
		p.vals, p.constant = v, true
		bufs = bufs[1:]
	}
	levels := func(b []byte) ([]uint16, error) {
		if len(b)%2 != 0 || uint64(len(b)/2) > MaxPageRows {
			return nil, fmt.Errorf("all-null page levels of %d bytes", len(b))
		}
		out := make([]uint16, len(b)/2)
		for i := range out {
			out[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
		return out, nil
	}
	var err error
	switch {
	case len(bufs) >= 2:
		if len(bufs[0]) > 0 {
			if p.rep, err = levels(bufs[0]); err != nil {
				return nil, err
			}
		}
		if len(bufs[1]) > 0 {
			if p.def, err = levels(bufs[1]); err != nil {
				return nil, err
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if p.rep == nil && p.def == nil {
		if rows > MaxPageRows {
			return nil, fmt.Errorf("all-null page of %d rows", rows)
		}
		p.def = make([]uint16, rows)
		if !p.constant {
			for i := range p.def {
				p.def[i] = 1
			}
		}
	}
	return p, nil
}

// constantValue parses a constant page's value: its buffer count and
// sizes (32 bits each), then the buffers: one of fixed-width bytes, or
// two offsets and the bytes of a variable-width value.
func constantValue(b []byte) (block, error) {
	if len(b) < 4 {
		return block{}, fmt.Errorf("constant value of %d bytes", len(b))
	}
	nb := int(binary.LittleEndian.Uint32(b))
	if nb < 1 || nb > 2 || len(b) < 4+4*nb {
		return block{}, fmt.Errorf("constant value with %d buffers", nb)
	}
	pos := 4 + 4*nb
	parts := make([][]byte, nb)
	for i := range parts {
		s := int(binary.LittleEndian.Uint32(b[4+4*i:]))
		if s > len(b)-pos {
			return block{}, fmt.Errorf("constant value buffer of %d bytes ends outside the page", s)
		}
		parts[i] = b[pos : pos+s]
		pos += s
	}
	if nb == 1 {
		return block{n: 1, bits: 8 * len(parts[0]), data: parts[0]}, nil
	}
	ow := len(parts[0]) / 2
	if ow != 4 && ow != 8 {
		return block{}, fmt.Errorf("constant value offsets of %d bytes", len(parts[0]))
	}
	offs := []uint64{readWord(parts[0], ow*8, 0), readWord(parts[0], ow*8, 1)}
	return checkedOffsets(parts[1], offs, 1)
}

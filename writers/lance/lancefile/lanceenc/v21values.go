package lanceenc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// Compressive encodings of Lance 2.1 and 2.2 (lance.encodings21), decoded
// into blocks. Every size read from the file is checked against the bytes
// it points into or charged to the read's budget before anything is
// allocated for it.

// block is decoded data: fixed-width values (bits per value, little
// endian; bits 1 is an LSB-first bitmap) or, when offs is set,
// variable-width values data[offs[i]:offs[i+1]].
type block struct {
	n    int
	bits int
	data []byte
	offs []uint64
}

// maxValueBits bounds a fixed width (decimal256 is the widest Arrow
// fixed-width value Lance stores flat, fixed-size lists multiply it).
const maxValueBits = 1 << 24

func (b block) fixedBytes() int { return (b.n*b.bits + 7) / 8 }

// checkDepth refuses encodings nested deeper than maxEncodingDepth.
func checkDepth(depth int) error {
	if depth > MaxEncodingDepth {
		return fmt.Errorf("encoding nested deeper than %d", MaxEncodingDepth)
	}
	return nil
}

// decodeMini decodes one mini-block chunk of n values from its buffers.
func decodeMini(bud *Budget, enc *encodings21pb.CompressiveEncoding, bufs [][]byte, n, depth int) (block, error) {
	if err := checkDepth(depth); err != nil {
		return block{}, err
	}
	switch c := enc.GetCompression().(type) {
	case *encodings21pb.CompressiveEncoding_Flat:
		return flatBlock(c.Flat, first(bufs), n)
	case *encodings21pb.CompressiveEncoding_InlineBitpacking:
		return inlineUnpack(bud, int(c.InlineBitpacking.UncompressedBitsPerValue), first(bufs), n)
	case *encodings21pb.CompressiveEncoding_ByteStreamSplit:
		return unsplitBytes(bud, c.ByteStreamSplit, first(bufs), n)
	case *encodings21pb.CompressiveEncoding_PackedStruct:
		// Whole rows of the struct's fixed-width fields (v21packed.go).
		b, err := decodeMini(bud, c.PackedStruct.Values, bufs, n, depth+1)
		if err != nil {
			return block{}, err
		}
		var sum uint64
		for _, w := range c.PackedStruct.BitsPerValue {
			sum += w
		}
		if b.offs != nil || uint64(b.bits) != sum {
			return block{}, fmt.Errorf("packed struct of %v bits per field holds %d-bit rows", c.PackedStruct.BitsPerValue, b.bits)
		}
		return b, nil
	case *encodings21pb.CompressiveEncoding_Rle:
		if len(bufs) < 2 {
			return block{}, fmt.Errorf("run-length chunk with %d buffers", len(bufs))
		}
		return runLengths(bud, c.Rle, bufs[0], bufs[1], n)
	case *encodings21pb.CompressiveEncoding_Variable:
		return miniVariable(c.Variable, first(bufs), n)
	case *encodings21pb.CompressiveEncoding_Fsst:
		inner, err := decodeMini(bud, c.Fsst.Values, bufs, n, depth+1)
		if err != nil {
			return block{}, err
		}
		return fsstDecode(bud, c.Fsst.SymbolTable, inner)
	case *encodings21pb.CompressiveEncoding_FixedSizeList:
		return fslBlock(c.FixedSizeList, n, func(items int) (block, error) {
			return decodeMini(bud, c.FixedSizeList.Values, bufs, items, depth+1)
		})
	case *encodings21pb.CompressiveEncoding_General:
		if len(bufs) == 0 {
			return block{}, fmt.Errorf("general compression without a buffer")
		}
		raw, err := decompress(bud, c.General.GetCompression().GetScheme(), bufs[0])
		if err != nil {
			return block{}, err
		}
		return decodeMini(bud, c.General.Values, append([][]byte{raw}, bufs[1:]...), n, depth+1)
	}
	return block{}, unsupported(enc)
}

// decodeBlock decodes a buffer of n values compressed as one block
// (definition and repetition levels, dictionaries).
func decodeBlock(bud *Budget, enc *encodings21pb.CompressiveEncoding, buf []byte, n, depth int) (block, error) {
	if err := checkDepth(depth); err != nil {
		return block{}, err
	}
	switch c := enc.GetCompression().(type) {
	case *encodings21pb.CompressiveEncoding_Flat:
		return flatBlock(c.Flat, buf, n)
	case *encodings21pb.CompressiveEncoding_OutOfLineBitpacking:
		return outOfLineUnpack(bud, c.OutOfLineBitpacking, buf, n)
	case *encodings21pb.CompressiveEncoding_InlineBitpacking:
		return inlineUnpack(bud, int(c.InlineBitpacking.UncompressedBitsPerValue), buf, n)
	case *encodings21pb.CompressiveEncoding_Rle:
		// The values' size (u64), the values, the run lengths.
		if len(buf) < 8 || binary.LittleEndian.Uint64(buf) > uint64(len(buf)-8) {
			return block{}, fmt.Errorf("run-length block of %d bytes", len(buf))
		}
		size := 8 + int(binary.LittleEndian.Uint64(buf))
		return runLengths(bud, c.Rle, buf[8:size], buf[size:], n)
	case *encodings21pb.CompressiveEncoding_Variable:
		return blockVariable(buf, n)
	case *encodings21pb.CompressiveEncoding_Fsst:
		inner, err := decodeBlock(bud, c.Fsst.Values, buf, n, depth+1)
		if err != nil {
			return block{}, err
		}
		return fsstDecode(bud, c.Fsst.SymbolTable, inner)
	case *encodings21pb.CompressiveEncoding_General:
		raw, err := decompress(bud, c.General.GetCompression().GetScheme(), buf)
		if err != nil {
			return block{}, err
		}
		return decodeBlock(bud, c.General.Values, raw, n, depth+1)
	case *encodings21pb.CompressiveEncoding_FixedSizeList:
		return fslBlock(c.FixedSizeList, n, func(items int) (block, error) {
			return decodeBlock(bud, c.FixedSizeList.Values, buf, items, depth+1)
		})
	}
	return block{}, unsupported(enc)
}

// runLengths expands n values stored as runs: each distinct value (flat,
// 8 to 64 bits) with its count (one byte); the last run may reach past n.
func runLengths(bud *Budget, r *encodings21pb.Rle, vals, lens []byte, n int) (block, error) {
	bits := r.GetValues().GetFlat().GetBitsPerValue()
	if (bits != 8 && bits != 16 && bits != 32 && bits != 64) || r.GetRunLengths().GetFlat().GetBitsPerValue() != 8 {
		return block{}, fmt.Errorf("run-length encoding of %v with lengths %v is not supported", r.GetValues(), r.GetRunLengths())
	}
	w := int(bits / 8)
	if len(vals)%w != 0 || len(vals)/w != len(lens) {
		return block{}, fmt.Errorf("run-length buffers of %d values and %d lengths", len(vals)/w, len(lens))
	}
	if err := bud.SpendDecoded(uint64(n) * uint64(w)); err != nil {
		return block{}, err
	}
	out := make([]byte, 0, n*w)
	for i, l := range lens {
		take := min(int(l), n-len(out)/w)
		for range take {
			out = append(out, vals[i*w:(i+1)*w]...)
		}
	}
	if len(out) != n*w {
		return block{}, fmt.Errorf("run lengths hold %d values, want %d", len(out)/w, n)
	}
	return block{n: n, bits: int(bits), data: out}, nil
}

// unsplitBytes joins n values stored byte-stream split (the first byte
// of every value, then the second, ...), which pylance writes for float
// columns whose metadata asks for it (lance-encoding:bss).
func unsplitBytes(bud *Budget, b *encodings21pb.ByteStreamSplit, buf []byte, n int) (block, error) {
	bits := b.GetValues().GetFlat().GetBitsPerValue()
	if bits != 32 && bits != 64 {
		return block{}, fmt.Errorf("byte-stream-split encoding of %v is not supported", b.GetValues())
	}
	w := int(bits / 8)
	if n < 0 || len(buf)/w < n {
		return block{}, fmt.Errorf("byte-stream-split buffer of %d bytes holds fewer than %d values", len(buf), n)
	}
	if err := bud.SpendDecoded(uint64(n * w)); err != nil {
		return block{}, err
	}
	out := make([]byte, n*w)
	for k := range w {
		for i, v := range buf[k*n : (k+1)*n] {
			out[i*w+k] = v
		}
	}
	return block{n: n, bits: int(bits), data: out}, nil
}

func first(bufs [][]byte) []byte {
	if len(bufs) == 0 {
		return nil
	}
	return bufs[0]
}

func unsupported(enc *encodings21pb.CompressiveEncoding) error {
	name := "none"
	if c := enc.GetCompression(); c != nil {
		name = fmt.Sprintf("%T", c)
	}
	return fmt.Errorf("compressive encoding %s is not supported by this reader", name)
}

func flatBlock(f *encodings21pb.Flat, buf []byte, n int) (block, error) {
	if f.GetData() != nil && f.GetData().GetScheme() != encodings21pb.CompressionScheme_COMPRESSION_ALGORITHM_UNSPECIFIED {
		return block{}, fmt.Errorf("compressed flat buffers are not supported")
	}
	bits := f.BitsPerValue
	if bits == 0 || bits > maxValueBits || (bits != 1 && bits%8 != 0) {
		return block{}, fmt.Errorf("flat encoding of %d bits per value", bits)
	}
	b := block{n: n, bits: int(bits)}
	need, ok := mulSat(uint64(n), bits)
	if !ok || (need+7)/8 > uint64(len(buf)) {
		return block{}, fmt.Errorf("flat buffer of %d bytes holds fewer than %d values of %d bits", len(buf), n, bits)
	}
	b.data = buf[:b.fixedBytes()]
	return b, nil
}

// inlineUnpack decodes chunks of FastLanes blocks, each led by its bit
// width as one t-bit word (Lance's InlineBitpacking).
func inlineUnpack(bud *Budget, t int, buf []byte, n int) (block, error) {
	if t != 8 && t != 16 && t != 32 && t != 64 {
		return block{}, fmt.Errorf("inline bit-packing of %d-bit values", t)
	}
	blocks := (n + flBlock - 1) / flBlock
	if err := bud.SpendDecoded(uint64(blocks) * flBlock * uint64(t) / 8); err != nil {
		return block{}, err
	}
	out := make([]byte, n*t/8)
	if err := inlineUnpackInto(out, t, buf, n); err != nil {
		return block{}, err
	}
	return block{n: n, bits: t, data: out}, nil
}

// inlineUnpackInto is inlineUnpack into out, which holds n t-bit values
// (t one of 8, 16, 32, 64).
func inlineUnpackInto(out []byte, t int, buf []byte, n int) error {
	blocks := (n + flBlock - 1) / flBlock
	var vals [flBlock]uint64
	pos := 0
	for i := range blocks {
		if len(buf)-pos < t/8 {
			return fmt.Errorf("bit-packed chunk ends before its width")
		}
		// Compared before int(): a 64-bit word with its top bit set
		// would turn negative.
		word := readWord(buf[pos:], t, 0)
		pos += t / 8
		if word > uint64(t) {
			return fmt.Errorf("bit width %d of %d-bit values", word, t)
		}
		w := int(word)
		size := flWords(t, w) * t / 8
		if len(buf)-pos < size {
			return fmt.Errorf("bit-packed chunk of %d bytes, want %d", len(buf)-pos, size)
		}
		if err := flUnpack(t, w, buf[pos:pos+size], vals[:]); err != nil {
			return err
		}
		pos += size
		putWords(out, t, i*flBlock, vals[:min(flBlock, n-i*flBlock)])
	}
	return nil
}

// outOfLineUnpack decodes blocks of 1024 values packed at a fixed width
// (the flat bits of its values); a tail shorter than a block is stored
// either packed (padded) or raw, which the buffer's length tells.
func outOfLineUnpack(bud *Budget, o *encodings21pb.OutOfLineBitpacking, buf []byte, n int) (block, error) {
	t := int(o.UncompressedBitsPerValue)
	f := o.GetValues().GetFlat()
	if (t != 8 && t != 16 && t != 32 && t != 64) || f == nil || f.BitsPerValue > uint64(t) {
		return block{}, fmt.Errorf("out-of-line bit-packing of %d-bit values is not supported with %v", t, o.GetValues())
	}
	w := int(f.BitsPerValue)
	if err := bud.SpendDecoded(uint64(n+flBlock) * uint64(t) / 8); err != nil {
		return block{}, err
	}
	words := flWords(t, w)
	whole, tail := n/flBlock, n%flBlock
	have := len(buf) / (t / 8)
	rawTail := tail > 0 && have == whole*words+tail
	need := whole * words
	if tail > 0 {
		need += words
		if rawTail {
			need += tail - words
		}
	}
	if have < need {
		return block{}, fmt.Errorf("bit-packed buffer of %d words, want %d", have, need)
	}
	out := make([]byte, n*t/8)
	vals := make([]uint64, flBlock)
	wb := words * t / 8
	for i := range whole + min(tail, 1) {
		src := buf[i*wb:]
		if i == whole && rawTail {
			copy(out[i*flBlock*t/8:], src[:tail*t/8])
			break
		}
		if err := flUnpack(t, w, src, vals); err != nil {
			return block{}, err
		}
		putWords(out, t, i*flBlock, vals[:min(flBlock, n-i*flBlock)])
	}
	return block{n: n, bits: t, data: out}, nil
}

// miniVariable decodes a mini-block chunk of variable-width values: n+1
// offsets (32 or 64 bits) from the chunk's start, then the bytes.
func miniVariable(v *encodings21pb.Variable, buf []byte, n int) (block, error) {
	ob := int(v.GetOffsets().GetFlat().GetBitsPerValue()) / 8
	if ob != 4 && ob != 8 || v.GetValues() != nil && v.GetValues().GetScheme() != 0 {
		return block{}, fmt.Errorf("variable encoding with offsets %v is not supported", v.GetOffsets())
	}
	if n < 0 || (n+1) > len(buf)/ob {
		return block{}, fmt.Errorf("variable chunk of %d bytes holds no %d offsets", len(buf), n+1)
	}
	offs := make([]uint64, n+1)
	for i := range offs {
		offs[i] = readWord(buf, ob*8, i)
	}
	return checkedOffsets(buf, offs, n)
}

// checkedOffsets rebases offs to offs[0] after checking that they rise
// Within data.
func checkedOffsets(data []byte, offs []uint64, n int) (block, error) {
	base := offs[0]
	for i := 1; i < len(offs); i++ {
		if offs[i] < offs[i-1] || offs[i] > uint64(len(data)) {
			return block{}, fmt.Errorf("variable offsets are not rising within the %d-byte buffer", len(data))
		}
	}
	if base > uint64(len(data)) {
		return block{}, fmt.Errorf("variable offsets start outside the buffer")
	}
	for i := range offs {
		offs[i] -= base
	}
	return block{n: n, data: data[base : offs[n]+base], offs: offs}, nil
}

// blockVariable decodes variable-width values compressed as a block:
// bits per offset and the bytes' start (both 32 or both 64 bits), the
// offsets, the bytes.
func blockVariable(buf []byte, n int) (block, error) {
	if len(buf) < 8 {
		return block{}, fmt.Errorf("variable block of %d bytes", len(buf))
	}
	ob, start := 4, uint64(binary.LittleEndian.Uint32(buf[4:]))
	hdr := 8
	if binary.LittleEndian.Uint32(buf) == 64 {
		if len(buf) < 16 {
			return block{}, fmt.Errorf("variable block of %d bytes", len(buf))
		}
		ob, start, hdr = 8, binary.LittleEndian.Uint64(buf[8:]), 16
	} else if binary.LittleEndian.Uint32(buf) != 32 {
		return block{}, fmt.Errorf("variable block with %d bits per offset", binary.LittleEndian.Uint32(buf))
	}
	if start < uint64(hdr) || start > uint64(len(buf)) || (start-uint64(hdr))/uint64(ob) < uint64(n+1) {
		return block{}, fmt.Errorf("variable block offsets do not fit")
	}
	offs := make([]uint64, n+1)
	for i := range offs {
		offs[i] = readWord(buf[hdr:], ob*8, i)
	}
	data := buf[start:]
	if offs[0] != 0 {
		return block{}, fmt.Errorf("variable block offsets do not start at 0")
	}
	return checkedOffsets(data, offs, n)
}

func fslBlock(f *encodings21pb.FixedSizeList, n int, inner func(items int) (block, error)) (block, error) {
	dim := f.ItemsPerValue
	if dim == 0 || dim > maxValueBits || f.HasValidity {
		return block{}, fmt.Errorf("fixed-size list of %d items (validity %v) is not supported", dim, f.HasValidity)
	}
	items, ok := mulSat(uint64(n), dim)
	if !ok || items > MaxPageRows*64 {
		return block{}, fmt.Errorf("fixed-size list of %d x %d items", n, dim)
	}
	b, err := inner(int(items))
	if err != nil {
		return block{}, err
	}
	if b.offs != nil || uint64(b.bits)*dim > maxValueBits || b.bits%8 != 0 {
		return block{}, fmt.Errorf("fixed-size list of %d-bit items", b.bits)
	}
	return block{n: n, bits: b.bits * int(dim), data: b.data}, nil
}

// decompress undoes general compression: LZ4 blocks led by their
// uncompressed size (u32), zstd frames or zstd led by its size (u64).
func decompress(bud *Budget, scheme encodings21pb.CompressionScheme, src []byte) ([]byte, error) {
	return decompressWith(bud, scheme, src, nil)
}

// decompressWith is decompress with zstd frames read by z (nil: a
// decoder of its own), which many small buffers share.
func decompressWith(bud *Budget, scheme encodings21pb.CompressionScheme, src []byte, z *zstdReader) ([]byte, error) {
	switch scheme {
	case encodings21pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4:
		if len(src) < 4 {
			return nil, fmt.Errorf("lz4 buffer of %d bytes", len(src))
		}
		n := uint64(binary.LittleEndian.Uint32(src))
		if err := bud.SpendDecoded(n); err != nil {
			return nil, err
		}
		out := make([]byte, n)
		got, err := lz4.UncompressBlock(src[4:], out)
		if err != nil || uint64(got) != n {
			return nil, fmt.Errorf("lz4 buffer does not decompress to its %d bytes: %v", n, err)
		}
		return out, nil
	case encodings21pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD:
		return zstdDecode(bud, src, z)
	}
	return nil, fmt.Errorf("general compression scheme %v is not supported", scheme)
}

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// zstdReader is a zstd decoder reused across the buffers of a page (a new
// one costs microseconds and kilobytes: a full-zip page compresses each
// value on its own). Its window is bounded by the reader's budget when it
// is made.
type zstdReader struct{ d *zstd.Decoder }

// decoder returns the decoder, making it (window bounded by maxMemory;
// DecodeAll bounded by its output's capacity) on first use.
func (z *zstdReader) decoder(maxMemory uint64) (*zstd.Decoder, error) {
	if z.d == nil {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(max(maxMemory, 1<<20)),
			zstd.WithDecodeAllCapLimit(true))
		if err != nil {
			return nil, err
		}
		z.d = d
	}
	return z.d, nil
}

func (z *zstdReader) close() {
	if z.d != nil {
		z.d.Close()
	}
}

// zstdDecode decompresses a zstd buffer (Lance's, its size stated in
// front, or a bare frame) with z, or a decoder of its own when z is nil.
func zstdDecode(bud *Budget, src []byte, z *zstdReader) ([]byte, error) {
	if len(src) == 0 {
		return nil, nil
	}
	limit, stated := bud.decoded, false
	if !bytes.HasPrefix(src, zstdMagic) || len(src) > 4 && src[4]&0x10 != 0 {
		if len(src) < 8 {
			return nil, fmt.Errorf("zstd buffer of %d bytes", len(src))
		}
		// Lance states the decompressed size in front of the frame.
		n := binary.LittleEndian.Uint64(src)
		if n > limit {
			return nil, fmt.Errorf("zstd buffer of %d bytes exceeds the reader's limit", n)
		}
		limit, stated, src = n, true, src[8:]
	}
	// The decoder's memory (window) is bounded by what the budget allows
	// (for a shared decoder, when it is made), and at least a small
	// window's worth; the output is bounded by the limit, so a frame that
	// expands beyond it stops there.
	window := limit
	if z == nil {
		z = &zstdReader{}
		defer z.close()
	} else {
		window = bud.decoded
	}
	d, err := z.decoder(window)
	if err != nil {
		return nil, err
	}
	var out []byte
	if stated { // at most the stated size, in one call
		if out, err = d.DecodeAll(src, make([]byte, 0, limit)); err != nil {
			return nil, fmt.Errorf("zstd buffer does not decode within its %d bytes: %w", limit, err)
		}
	} else if out, err = readLimited(d, src, limit); err != nil {
		return nil, err
	}
	if err := bud.SpendDecoded(uint64(len(out))); err != nil {
		return nil, err
	}
	return out, nil
}

// readLimited streams a bare zstd frame through d, refusing more than
// limit bytes.
func readLimited(d *zstd.Decoder, src []byte, limit uint64) ([]byte, error) {
	if err := d.Reset(bytes.NewReader(src)); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.Grow(int(min(limit, uint64(len(src))*4)))
	n, err := io.Copy(&out, io.LimitReader(d, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("zstd buffer: %w", err)
	}
	if uint64(n) > limit {
		return nil, fmt.Errorf("zstd buffer decodes to more than its %d bytes", limit)
	}
	return out.Bytes(), nil
}

// fsstDecode expands FSST-compressed values with the page's symbol table:
// a header (symbol count in its low byte, "FSST" magic in its high
// bytes), the symbols (8 bytes each) and their lengths; code 255 escapes
// a literal byte.
func fsstDecode(bud *Budget, table []byte, in block) (block, error) {
	if in.offs == nil {
		return block{}, fmt.Errorf("FSST over fixed-width values")
	}
	if len(table) < 8 || binary.LittleEndian.Uint32(table[4:]) != 0x46535354 {
		return block{}, fmt.Errorf("FSST symbol table without its magic")
	}
	info := binary.LittleEndian.Uint64(table)
	if info&(1<<24) == 0 { // the encoder kept the values as they were
		return in, nil
	}
	ns := int(info & 255)
	if len(table) < 8+9*ns {
		return block{}, fmt.Errorf("FSST symbol table of %d bytes for %d symbols", len(table), ns)
	}
	syms := table[8 : 8+8*ns]
	lens := table[8+8*ns : 8+9*ns]
	// Every code expands to at most 8 bytes.
	if err := bud.SpendDecoded(uint64(len(in.data)) * 8); err != nil {
		return block{}, err
	}
	out := make([]byte, 0, len(in.data)*3)
	offs := make([]uint64, in.n+1)
	for i := range in.n {
		src := in.data[in.offs[i]:in.offs[i+1]]
		for j := 0; j < len(src); j++ {
			c := int(src[j])
			if c == 255 {
				j++
				if j == len(src) {
					return block{}, fmt.Errorf("FSST value ends in an escape")
				}
				out = append(out, src[j])
				continue
			}
			if c >= ns || lens[c] == 0 || lens[c] > 8 {
				return block{}, fmt.Errorf("FSST code %d outside the %d-symbol table", c, ns)
			}
			out = append(out, syms[8*c:8*c+int(lens[c])]...)
		}
		offs[i+1] = uint64(len(out))
	}
	return block{n: in.n, data: out, offs: offs}, nil
}

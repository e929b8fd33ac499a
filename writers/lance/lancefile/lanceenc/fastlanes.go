package lanceenc

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// FastLanes bit-packing, the layout Lance 2.1+ bit-packs integers in: a
// block of 1024 values of a T-bit type is packed at W bits per value into
// 1024*W/T words of T bits. Value rows are interleaved over 1024/T lanes
// in FastLanes' "unified transposed" order, so that each lane packs and
// unpacks independently (SIMD-friendly): row r of lane l sits at
// flOrder[r/8]*16 + (r%8)*128 + l in the block.

// flBlock is the number of values of one FastLanes block.
const flBlock = 1024

// flOrder is FastLanes' transposition order of 8-row groups.
var flOrder = [8]int{0, 4, 2, 6, 1, 5, 3, 7}

// flWords is the number of T-bit words a block packed at w bits takes.
func flWords(t, w int) int { return flBlock * w / t }

// readWord reads the i-th little-endian word of t bits of b.
func readWord(b []byte, t, i int) uint64 {
	switch t {
	case 8:
		return uint64(b[i])
	case 16:
		return uint64(binary.LittleEndian.Uint16(b[2*i:]))
	case 32:
		return uint64(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return binary.LittleEndian.Uint64(b[8*i:])
}

// readWords reads len(dst) little-endian words of t bits from b.
func readWords(dst []uint64, b []byte, t int) {
	switch t {
	case 8:
		b = b[:len(dst)]
		for i := range dst {
			dst[i] = uint64(b[i])
		}
	case 16:
		b = b[:2*len(dst)]
		for i := range dst {
			dst[i] = uint64(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case 32:
		b = b[:4*len(dst)]
		for i := range dst {
			dst[i] = uint64(binary.LittleEndian.Uint32(b[4*i:]))
		}
	default:
		b = b[:8*len(dst)]
		for i := range dst {
			dst[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
	}
}

// putWords writes vals as little-endian words of t bits into b, from its
// word at on.
func putWords(b []byte, t, at int, vals []uint64) {
	switch t {
	case 8:
		b = b[at : at+len(vals)]
		for i, v := range vals {
			b[i] = byte(v)
		}
	case 16:
		b = b[2*at : 2*(at+len(vals))]
		for i, v := range vals {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
		}
	case 32:
		b = b[4*at : 4*(at+len(vals))]
		for i, v := range vals {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
		}
	default:
		b = b[8*at : 8*(at+len(vals))]
		for i, v := range vals {
			binary.LittleEndian.PutUint64(b[8*i:], v)
		}
	}
}

// putWord writes v as the i-th little-endian word of t bits of b.
func putWord(b []byte, t, i int, v uint64) {
	switch t {
	case 8:
		b[i] = byte(v)
	case 16:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	case 32:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	default:
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
}

// flUnpack unpacks one block of 1024 t-bit values packed at w bits from
// packed (at least flWords(t, w) words) into out (1024 values).
func flUnpack(t, w int, packed []byte, out []uint64) error {
	if w < 0 || w > t {
		return fmt.Errorf("bit width %d of a %d-bit block", w, t)
	}
	if len(packed) < flWords(t, w)*t/8 || len(out) < flBlock {
		return fmt.Errorf("bit-packed block of %d bytes, want %d", len(packed), flWords(t, w)*t/8)
	}
	if w == 0 {
		clear(out[:flBlock])
		return nil
	}
	lanes := flBlock / t
	mask := uint64(1)<<w - 1
	if w == 64 {
		mask = ^uint64(0)
	}
	var buf [flBlock]uint64
	words := buf[:flWords(t, w)]
	readWords(words, packed, t)
	for row := range t {
		bit := row * w
		word, shift := bit/t, bit%t
		base := flOrder[row/8]*16 + (row%8)*128
		dst := out[base : base+lanes]
		cur := words[lanes*word : lanes*word+lanes]
		cur = cur[:len(dst)]
		if shift+w > t {
			next := words[lanes*(word+1) : lanes*(word+1)+lanes]
			next = next[:len(dst)]
			for lane := range dst {
				dst[lane] = (cur[lane]>>shift | next[lane]<<(t-shift)) & mask
			}
			continue
		}
		for lane := range dst {
			dst[lane] = cur[lane] >> shift & mask
		}
	}
	return nil
}

// flWord is the unsigned integer of a FastLanes word of t bits.
type flWord interface {
	uint8 | uint16 | uint32 | uint64
}

// flBits is t, the bits of a word of T.
func flBits[T flWord]() int { return 8 * int(unsafe.Sizeof(T(0))) }

// flPack packs a block of 1024 values, each under 1<<w, into out, its
// flWords(t, w) words (t the bits of T), in FastLanes' transposed layout.
// Working on words of the values' own size (not widened to 64 bits)
// reads the page's buffer in place and needs no conversion after.
func flPack[T flWord](w int, in, out []T) {
	clear(out)
	if w == 0 {
		return
	}
	t := flBits[T]()
	// Rows in the order their values lie in the block (flOrder is its
	// own inverse: row k*8+r8's values start at flOrder[k]*16 + r8*128),
	// so that the block is read front to back. In row order, each row's
	// values of a page no longer in cache were a miss the prefetcher did
	// not foresee (BenchmarkPackPage/t64_w20: 9.8-11.4 ms a page of 1M
	// values in row order, 4.3-4.9 in this order).
	for r8 := range 8 {
		for _, k := range flOrder {
			if k >= t/8 {
				continue
			}
			flPackRow(k*8+r8, w, in, out)
		}
	}
}

// flPackRow ors the values of one row of a block into their words. The
// shifts are masked to the word's bits (they are below it already), so
// that the compiler need not make a shift by t or more yield 0.
func flPackRow[T flWord](row, w int, in, out []T) {
	t := flBits[T]()
	lanes := flBlock / t
	bit := row * w
	word, shift := bit/t, uint(bit%t)
	base := flOrder[row/8]*16 + (row%8)*128
	src := in[base : base+lanes]
	cur := out[lanes*word : lanes*word+lanes]
	cur = cur[:len(src)]
	for lane, v := range src {
		cur[lane] |= v << (shift & uint(t-1))
	}
	if int(shift)+w > t {
		next := out[lanes*(word+1) : lanes*(word+1)+lanes]
		next = next[:len(src)]
		back := (uint(t) - shift) & uint(t-1)
		for lane, v := range src {
			next[lane] |= v >> back
		}
	}
}

// wordsOf is b read as little-endian words of T in place (the hosts Quiver
// builds for are little-endian, as Lance's and Arrow's buffers are).
func wordsOf[T flWord](b []byte) []T {
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)*8/flBits[T]())
}

// bytesOf is the bytes of words, in place.
func bytesOf[T flWord](words []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*flBits[T]()/8)
}

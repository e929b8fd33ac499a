package lanceenc

import (
	"encoding/binary"
	"fmt"
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

// flPack packs 1024 t-bit values (each below 2^w) at w bits into out
// (flWords(t, w) words). The words are assembled in 64-bit registers and
// written once each.
func flPack(t, w int, in []uint64, out []byte) {
	if w == 0 {
		return
	}
	lanes := flBlock / t
	var buf [flBlock]uint64
	words := buf[:flWords(t, w)]
	for row := range t {
		bit := row * w
		word, shift := bit/t, bit%t
		base := flOrder[row/8]*16 + (row%8)*128
		cur := words[lanes*word : lanes*word+lanes]
		for lane, v := range in[base : base+lanes] {
			cur[lane] |= v << shift
		}
		if shift+w > t {
			next := words[lanes*(word+1) : lanes*(word+1)+lanes]
			for lane, v := range in[base : base+lanes] {
				next[lane] |= v >> (t - shift)
			}
		}
	}
	putWords(out, t, 0, words) // bits above t are dropped here
}

package lanceenc

import (
	"bytes"
	"testing"

	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// TestFullZipHostileHeaders: page header fields another process wrote are
// checked before they size anything or drive the item loop — a visible
// item count beyond the items (which sized a 34 GB allocation, an
// unrecoverable out-of-memory) and values of zero bits (an out-of-range
// read) are errors.
func TestFullZipHostileHeaders(t *testing.T) {
	data := [][]byte{{1, 2}}
	for name, z := range map[string]*encodings21pb.FullZipLayout{
		"visible beyond items": {NumItems: 1, NumVisibleItems: 0xFFFFFFF0,
			Details: &encodings21pb.FullZipLayout_BitsPerOffset{BitsPerOffset: 32}},
		"zero-bit values": {NumItems: 2, NumVisibleItems: 2,
			Details: &encodings21pb.FullZipLayout_BitsPerValue{BitsPerValue: 0}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := decodeFullZip(NewBudget(1<<20), z, data); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestInlineWidthTopBitSet: a 64-bit inline bit-packed chunk whose width
// word has its top bit set is an error (as an int it was negative, passed
// the width check and panicked slicing).
func TestInlineWidthTopBitSet(t *testing.T) {
	buf := append(bytes.Repeat([]byte{0xff}, 8), make([]byte, 64)...)
	if _, err := inlineUnpack(NewBudget(1<<20), 64, buf, 1); err == nil {
		t.Fatal("accepted")
	}
}

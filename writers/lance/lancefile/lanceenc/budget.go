package lanceenc

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
)

// maxUnbackedBytes bounds the Arrow memory one read decodes that the
// file's bytes do not hold: all-null pages (no buffers at all, whatever
// their row count) and dictionary pages (every row copies its item). A
// hostile file would otherwise turn a few metadata bytes into gigabytes.
const maxUnbackedBytes = 256 << 20

// Budget is what one read may still spend: page buffer bytes (at most the
// file's size in all, so that pages sharing one region cannot multiply
// it) and unbacked bytes.
type Budget struct {
	buffers, unbacked uint64
	decoded           uint64 // bytes decompression may still produce
}

// decodedPerFileByte bounds what decompression may produce per byte of
// the file (bit-packing 64-bit zeros at width 0 is the extreme; FastLanes
// blocks and FSST stay far below it for real data).
const decodedPerFileByte = 64

// NewBudget is the budget of one read of a file of fileSize bytes.
func NewBudget(fileSize uint64) *Budget {
	d, _ := mulSat(fileSize, decodedPerFileByte)
	return &Budget{buffers: fileSize, unbacked: maxUnbackedBytes, decoded: d + maxUnbackedBytes}
}

// SpendDecoded charges n bytes that decompression produces.
func (b *Budget) SpendDecoded(n uint64) error {
	if n > b.decoded {
		return fmt.Errorf("compressed data decodes to more than the reader's limit (%d bytes per byte of the file)", decodedPerFileByte)
	}
	b.decoded -= n
	return nil
}

// SpendBuffers charges n bytes of page buffers read from the file.
func (b *Budget) SpendBuffers(n uint64) error {
	if n > b.buffers {
		return fmt.Errorf("page buffers add up to more than the file's size (pages overlap)")
	}
	b.buffers -= n
	return nil
}

// SpendUnbacked charges n bytes that what decodes to beyond the file's
// bytes.
func (b *Budget) SpendUnbacked(n uint64, what string) error {
	if n > b.unbacked {
		return fmt.Errorf("%s decodes to more than the reader's limit of %d bytes not held in the file", what, uint64(maxUnbackedBytes))
	}
	b.unbacked -= n
	return nil
}

// NullBytes is (at least) the Arrow memory of n null values of dt,
// saturating at math.MaxUint64.
func NullBytes(dt arrow.DataType, n uint64) uint64 {
	switch dt := dt.(type) {
	case *arrow.FixedSizeListType:
		items, ok := mulSat(n, uint64(max(dt.Len(), 0)))
		if !ok {
			return math.MaxUint64
		}
		return NullBytes(dt.Elem(), items)
	case arrow.FixedWidthDataType:
		v, _ := mulSat(n, uint64(max(dt.BitWidth(), 1)))
		return v / 8
	}
	v, _ := mulSat(n, 8) // offsets
	return v
}

// mulSat returns a*b, or math.MaxUint64 and false when it overflows.
func mulSat(a, b uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64, false
	}
	return lo, true
}

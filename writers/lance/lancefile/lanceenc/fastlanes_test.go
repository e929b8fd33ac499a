package lanceenc

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestFastLanesRoundTrip: every width of every type packs and unpacks
// 1024 values to themselves, and inlineUnpack reads back what the
// chunk encoder writes, tails included.
func TestFastLanesRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, tb := range []int{8, 16, 32, 64} {
		for w := 0; w <= tb; w++ {
			in := make([]uint64, flBlock)
			for i := range in {
				if w > 0 {
					in[i] = r.Uint64() >> (64 - w)
				}
			}
			packed := packBlock(tb, w, in)
			out := make([]uint64, flBlock)
			if err := flUnpack(tb, w, packed, out); err != nil {
				t.Fatal(err)
			}
			for i := range in {
				if in[i] != out[i] {
					t.Fatalf("t=%d w=%d: value %d unpacked as %d, want %d", tb, w, i, out[i], in[i])
				}
			}
		}
	}
}

// packBlock packs 1024 values of tb bits at w bits with flPack.
func packBlock(tb, w int, in []uint64) []byte {
	switch tb {
	case 8:
		return packAs[uint8](w, in)
	case 16:
		return packAs[uint16](w, in)
	case 32:
		return packAs[uint32](w, in)
	}
	return packAs[uint64](w, in)
}

func packAs[T flWord](w int, in []uint64) []byte {
	vals := make([]T, len(in))
	for i, v := range in {
		vals[i] = T(v)
	}
	t := flBits[T]()
	out := make([]T, flWords(t, w))
	flPack(w, vals, out)
	return bytesOf(out)
}

// BenchmarkInlineUnpack decodes 2M 64-bit values packed at 21 bits (row
// ids of a 2M-row table), as a key column read does.
func BenchmarkInlineUnpack(b *testing.B) {
	const n, w = 2 << 20, 21
	r := rand.New(rand.NewPCG(1, 2))
	var buf []byte
	in := make([]uint64, flBlock)
	for range n / flBlock {
		for i := range in {
			in[i] = r.Uint64() >> (64 - w)
		}
		buf = binary.LittleEndian.AppendUint64(buf, w)
		packed := packBlock(64, w, in)
		buf = append(buf, packed...)
	}
	b.SetBytes(n * 8)
	for b.Loop() {
		if _, err := inlineUnpack(NewBudget(1<<30), 64, buf, n); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPackPage bit-packs pages of 1M values as the append's integer
// columns are (row ids of 64 bits at 20 bits, 32-bit quantities at 10,
// 32-bit dictionary indices at 4): the widths pass and every block packed.
func BenchmarkPackPage(b *testing.B) {
	const n = 1 << 20
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ t, w int }{{64, 20}, {32, 10}, {32, 4}} {
		data := make([]byte, 0, n*c.t/8)
		for i := range n {
			v := uint64(i)
			if c.t == 32 {
				v = r.Uint64() >> (64 - c.w)
			}
			data = binary.LittleEndian.AppendUint64(data, v)[:len(data)+c.t/8]
		}
		b.Run(fmt.Sprintf("t%d_w%d", c.t, c.w), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				pv := intValues(data, c.t, n)
				var dst []byte
				for first := 0; first < n; first += flBlock {
					dst = pv.c.appendChunk(dst[:0], first, pv.c.next(first))
				}
			}
		})
	}
}

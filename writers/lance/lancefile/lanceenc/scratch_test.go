package lanceenc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestScratchTiers(t *testing.T) {
	for _, n := range []int{0, 1, 1<<16 - 1, 1 << 16, 1<<16 + 1, 3 << 20, 1 << 26, 1<<26 + 1} {
		if b := getScratch(n); len(b) != 0 || cap(b) < n {
			t.Fatalf("getScratch(%d): len %d cap %d", n, len(b), cap(b))
		}
		tier, ok := scratchTier(n)
		if want := n >= 1<<16 && n <= 1<<26; ok != want {
			t.Fatalf("scratchTier(%d): pooled %v, want %v", n, ok, want)
		}
		if c := 1 << (scratchMinShift + tier); ok && (c < n || c >= 2*n) {
			t.Fatalf("scratchTier(%d) = %d: a new buffer of %d bytes, want n to 2n", n, tier, c)
		}
	}
	// A buffer of any capacity goes back to the tier it fills: what comes
	// back for n always has room for n.
	for _, c := range []int{1<<16 + 5, 100_000, 1<<20 - 1, 1 << 20, 5 << 20} {
		putScratch(make([]byte, 10, c))
		for _, n := range []int{1 << 16, 1<<17 + 1, c} {
			if b := getScratch(n); cap(b) < n || len(b) != 0 {
				t.Fatalf("after putting cap %d: getScratch(%d) has len %d cap %d", c, n, len(b), cap(b))
			}
		}
	}
}

// TestScratchReuseKeepsPages encodes the same columns with fresh buffers
// and with recycled buffers full of garbage: the pages must not differ.
func TestScratchReuseKeepsPages(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	mem := memory.DefaultAllocator
	ids := array.NewInt64Builder(mem)
	names := array.NewStringBuilder(mem)                           // FSST
	amounts := array.NewFloat64Builder(mem)                        // flat
	kinds := array.NewStringBuilder(mem)                           // a dictionary
	flags := array.NewBooleanBuilder(mem)                          // bit-packed bools
	lists := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int32) // levels and values
	items := lists.ValueBuilder().(*array.Int32Builder)
	for i := range 200_000 {
		ids.Append(int64(i * 3))
		if i%97 == 0 {
			names.AppendNull()
		} else {
			names.Append(fmt.Sprintf("user-%08x@example.com", rng.Uint32()))
		}
		amounts.Append(rng.Float64())
		kinds.Append(fmt.Sprintf("kind-%d", rng.IntN(12)))
		flags.Append(rng.IntN(3) == 0)
		switch n := rng.IntN(5); {
		case n == 0 && i%2 == 0:
			lists.AppendNull()
		default:
			lists.Append(true)
			for range n {
				items.Append(rng.Int32N(1 << 20))
			}
		}
	}
	cols := []arrow.Array{ids.NewArray(), names.NewArray(), amounts.NewArray(), kinds.NewArray(), flags.NewArray(), lists.NewArray()}
	for _, b := range []interface{ Release() }{ids, names, amounts, kinds, flags, lists} {
		b.Release()
	}
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	encode := func() [][]byte {
		var out [][]byte
		for _, c := range cols {
			// two chunks, so that the values are gathered, not aliased
			chunks := []arrow.Array{array.NewSlice(c, 0, 70_000), array.NewSlice(c, 70_000, int64(c.Len()))}
			_, err := EncodeField(c.DataType(), chunks, 1, 0, 2, nil, func(_ int, p Page) error {
				for _, b := range p.Bufs {
					out = append(out, bytes.Clone(b))
				}
				p.Recycle()
				return nil
			})
			for _, ch := range chunks {
				ch.Release()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	runtime.GC() // two collections empty the pools: the first run's buffers are new
	runtime.GC()
	fresh := encode()
	for range 2 { // the tiers these pages use hold garbage
		for s := scratchMinShift; s <= 23; s++ {
			putScratch(bytes.Repeat([]byte{0xA5}, 1<<s))
		}
	}
	for run := range 3 {
		got := encode()
		if len(got) != len(fresh) {
			t.Fatalf("run %d: %d buffers, want %d", run, len(got), len(fresh))
		}
		for i := range got {
			if !bytes.Equal(got[i], fresh[i]) {
				t.Fatalf("run %d: buffer %d differs with recycled scratch buffers", run, i)
			}
		}
	}
}

package lance

import (
	"slices"
	"testing"

	"github.com/quiver-ingest/quiver/internal/alloccheck"
)

func TestDropSet(t *testing.T) {
	s := newDropSet(1)
	if !s.empty() || s.has(0) {
		t.Fatal("a new set is not empty")
	}
	s.addFragment(3)
	s.addOffsets(1, []uint32{0, 63, 64, 1000})
	s.addOffsets(5000, []uint32{1000}) // beyond the ids kept in the slice
	if len(s.far) != 1 || len(s.slots) != 4 {
		t.Fatalf("%d fragments in the map, %d slots: want 1, 4", len(s.far), len(s.slots))
	}
	if s.empty() {
		t.Fatal("the set is empty after adds")
	}
	for _, c := range []struct {
		name string
		addr uint64
		want bool
	}{
		{"whole fragment", 3<<32 | 12345, true},
		{"offset 0", 1 << 32, true},
		{"word edge 63", 1<<32 | 63, true},
		{"word edge 64", 1<<32 | 64, true},
		{"last offset", 1<<32 | 1000, true},
		{"offset between", 1<<32 | 65, false},
		{"past the bitset", 1<<32 | 5000, false},
		{"fragment without entry", 2 << 32, false},
		{"fragment past the slice", 9 << 32, false},
		{"fragment in the map", 5000<<32 | 1000, true},
		{"fragment past the map's", 5001<<32 | 1000, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := s.has(c.addr); got != c.want {
				t.Fatalf("has(%x) = %v, want %v", c.addr, got, c.want)
			}
		})
	}
}

func TestUnionSorted(t *testing.T) {
	for _, c := range []struct {
		name      string
		old, offs []uint32
		want      []uint32
	}{
		{"empty old", nil, []uint32{5, 1}, []uint32{1, 5}},
		{"interleaved", []uint32{1, 4, 9}, []uint32{10, 0, 5}, []uint32{0, 1, 4, 5, 9, 10}},
		{"unsorted old is kept for the caller to sort", []uint32{9, 1}, []uint32{3, 2}, []uint32{9, 1, 2, 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := unionSorted(c.old, c.offs); !slices.Equal(got, c.want) {
				t.Fatalf("unionSorted = %v, want %v", got, c.want)
			}
		})
	}
}

// TestDropSetSparse: offsets spread far apart go to a roaring bitmap,
// dense ones to a bitset, and both answer has alike, also when a
// fragment's offsets come in two calls that need different kinds.
func TestDropSetSparse(t *testing.T) {
	var s dropSet
	far := []uint32{5, 1 << 20, 1<<32 - 1}
	s.addOffsets(7, far)
	s.addOffsets(8, []uint32{1, 2, 3})
	s.addOffsets(8, []uint32{1 << 30}) // the bitset moves to a bitmap
	if f := s.fragment(7); f.sparse == nil || f.bits != nil {
		t.Fatal("far-apart offsets took a bitset")
	}
	// The scans' form: a bitset of the rows read, no sparse part.
	g := s.fragment(7).forRows(1 << 21)
	if g.sparse != nil || len(g.bits) != 1<<21/64 || !g.inBits(5) || !g.inBits(1<<20) || g.inBits(6) || g.inBits(1<<21-1) {
		t.Fatalf("forRows: sparse %v, %d words, wrong offsets", g.sparse != nil, len(g.bits))
	}
	for addr, want := range map[uint64]bool{
		7<<32 | 5: true, 7<<32 | 1<<20: true, 7<<32 | (1<<32 - 1): true, 7<<32 | 6: false,
		8<<32 | 1: true, 8<<32 | 3: true, 8<<32 | 1<<30: true, 8<<32 | 4: false, 9<<32 | 1: false,
	} {
		if got := s.has(addr); got != want {
			t.Errorf("has(%d:%d) = %v, want %v", addr>>32, uint32(addr), got, want)
		}
	}
}

// TestDropSetHostileBounded: fragment ids and offsets come from other
// processes' manifests and deletion files: the largest id an index
// accepts and the largest offset allocate next to nothing (a slice by id
// took 16 GiB, a bitset by offset 512 MiB).
func TestDropSetHostileBounded(t *testing.T) {
	var s dropSet
	alloccheck.Below(t, "dropSet", func() {
		s.addFragment(maxIndexedFragment)
		s.addOffsets(maxIndexedFragment-1, []uint32{1<<32 - 1})
	})
	if !s.has(maxIndexedFragment<<32|7) || !s.has((maxIndexedFragment-1)<<32|(1<<32-1)) || s.has(3<<32) {
		t.Fatal("the hostile entries are not what was added")
	}
}

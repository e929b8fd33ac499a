package lance

import (
	"slices"
	"testing"
)

func TestDropSet(t *testing.T) {
	var s dropSet
	if !s.empty() || s.has(0) {
		t.Fatal("a new set is not empty")
	}
	s.addFragment(3)
	s.addOffsets(1, []uint32{0, 63, 64, 1000})
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

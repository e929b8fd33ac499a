package flightsvc

import "testing"

func TestRecvPool(t *testing.T) {
	p := NewRecvPool()
	for _, n := range []int{0, 1, 1023, 1024, 1025, 16 << 10, 16<<10 + 1, 1 << 20, 1<<20 + 1, 3 << 20} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): len %d", n, len(*b))
		}
		if n <= 1<<20 && cap(*b) >= 2*max(n, 1024) {
			t.Fatalf("Get(%d): cap %d, want less than twice the length", n, cap(*b))
		}
		for i := range *b {
			(*b)[i] = 0xAB
		}
		p.Put(b)
	}
	// A buffer comes back, its bytes as they were, for a request of its
	// tier (sync.Pool may drop a put buffer, under -race one in four).
	b := p.Get(10_000)
	for range 100 {
		(*b)[0] = 0x5A
		first := &(*b)[0]
		p.Put(b)
		g := p.Get(9_000)
		if &(*g)[0] == first {
			if len(*g) != 9_000 || (*g)[0] != 0x5A {
				t.Fatalf("the recycled buffer: len %d, first byte %#x, want 9000 and 0x5a", len(*g), (*g)[0])
			}
			return
		}
		b = g
	}
	t.Fatal("a put buffer never came back")
}

func TestRecvPoolIgnoresOddCaps(t *testing.T) {
	p := NewRecvPool()
	odd := make([]byte, 100, 5000) // not a tier's capacity: Get(5000) must not return it
	p.Put(&odd)
	for range 100 {
		if b := p.Get(5000); cap(*b) == 5000 {
			t.Fatal("Put kept a buffer whose capacity is no tier's")
		}
	}
}

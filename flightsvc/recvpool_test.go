package flightsvc

import "testing"

func TestRecvPool(t *testing.T) {
	p := NewRecvPool()
	for _, n := range []int{0, 1, 255, 256, 257, 16 << 10, 16<<10 + 1, 1 << 20, 1<<20 + 1, 3 << 20} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): len %d", n, len(*b))
		}
		if n <= 1<<20 && cap(*b) >= 2*max(n, 256) {
			t.Fatalf("Get(%d): cap %d, want less than twice the length", n, cap(*b))
		}
		for i := range *b {
			(*b)[i] = 0xAB
		}
		p.Put(b)
	}
	// A buffer comes back for a request of its tier, with the length asked
	// for (and, as gRPC's dirty pools do, the old bytes).
	b := p.Get(10_000)
	c := cap(*b)
	p.Put(b)
	for range 100 { // sync.Pool may drop it; it must come back sometime
		if b = p.Get(9_000); cap(*b) == c && len(*b) == 9_000 {
			return
		}
	}
	t.Fatalf("a put buffer of cap %d never came back", c)
}

func TestRecvPoolIgnoresOddCaps(t *testing.T) {
	p := NewRecvPool()
	odd := make([]byte, 100, 1000) // not a tier's capacity: Get(1000) must not return it
	p.Put(&odd)
	for range 100 {
		if b := p.Get(1000); cap(*b) == 1000 {
			t.Fatal("Put kept a buffer whose capacity is no tier's")
		}
	}
}

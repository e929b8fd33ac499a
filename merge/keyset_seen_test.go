package merge

import (
	"bytes"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestKeySetSeen: batches of int64 keys too spread for the direct table
// but within seenBitsPerKey values a key are numbered in the order they
// come, with the hash table owed; a repeated key, a batch beyond the
// bitmap's reach, an Add or a Find builds it. In every case the ordinals,
// Find, Key and Len equal a map's.
func TestKeySetSeen(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	spread := func(lo int64, n, every int) []int64 { // n distinct values about every apart, shuffled
		xs := make([]int64, n)
		for i, p := range rng.Perm(n) {
			xs[i] = lo + int64(p*every+rng.IntN(every))
		}
		return xs
	}
	ids := func(lo int64, n int) []int64 {
		xs := make([]int64, n)
		for i := range xs {
			xs[i] = lo + int64(i)
		}
		return xs
	}
	type step struct {
		xs  []int64
		add int64 // with xs nil: Add this key
	}
	cases := map[string]struct {
		steps []step
		lazy  bool // the table is still owed at the end
	}{
		"merge source (updates over a table, then new ids)": {[]step{{xs: spread(0, 30_000, 60)}, {xs: spread(0, 20_000, 60)[:0]}, {xs: ids(2_000_000, 25_000)}}, true},
		"updates, then more updates elsewhere":              {[]step{{xs: spread(0, 10_000, 30)}, {xs: spread(400_000, 10_000, 30)}}, true},
		"repeat within a batch":                             {[]step{{xs: append(spread(0, 5_000, 20), 77, 77)}}, false},
		"repeat across batches":                             {[]step{{xs: spread(0, 5_000, 20)}, {xs: spread(0, 5_000, 20)}}, false},
		"a batch beyond the bitmap's reach":                 {[]step{{xs: spread(0, 5_000, 20)}, {xs: ids(1<<50, 100)}}, false},
		"top of the range":                                  {[]step{{xs: spread(math.MaxInt64-200_000, 5_000, 40)}, {xs: []int64{math.MaxInt64, math.MaxInt64 - 1}}}, true},
		"bottom of the range, growing down":                 {[]step{{xs: spread(math.MinInt64+1000, 5_000, 40)}, {xs: []int64{math.MinInt64, math.MinInt64 + 1}}}, true},
		"dense first, then spread":                          {[]step{{xs: ids(0, 3_000)}, {xs: spread(10_000, 5_000, 40)}}, true},
		"an Add in between":                                 {[]step{{xs: spread(0, 5_000, 20)}, {add: 123_456_789}, {xs: spread(200_000, 5_000, 20)}}, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := NewLazyKeySet(0)
			model := map[int64]int{}
			want := func(x int64) int {
				if ord, ok := model[x]; ok {
					return ord
				}
				model[x] = len(model)
				return len(model) - 1
			}
			for _, st := range c.steps {
				if st.xs == nil {
					if ord, _ := s.Add(int64Key(uint64(st.add) ^ signBit)); ord != want(st.add) {
						t.Fatalf("Add(%d) = %d, want %d", st.add, ord, model[st.add])
					}
					continue
				}
				for i, ord := range s.AddInt64s(st.xs, nil) {
					if int(ord) != want(st.xs[i]) {
						t.Fatalf("AddInt64s: %d numbered %d, want %d", st.xs[i], ord, model[st.xs[i]])
					}
				}
			}
			if s.lazy.Load() != c.lazy || s.Len() != len(model) {
				t.Fatalf("table owed %v (want %v), Len %d (want %d)", s.lazy.Load(), c.lazy, s.Len(), len(model))
			}
			if c.lazy && (s.slots != nil || len(s.seen) == 0) {
				t.Fatalf("%d slots, %d bitmap words while the table is owed", len(s.slots), len(s.seen))
			}
			for x, ord := range model {
				k := int64Key(uint64(x) ^ signBit)
				if got, ok := s.Find(k); !ok || got != ord || !bytes.Equal(s.Key(ord), k) {
					t.Fatalf("Find(%d) = %d, %v, want %d", x, got, ok, ord)
				}
			}
			if s.lazy.Load() || s.seen != nil {
				t.Fatal("Find left the table owed")
			}
			for _, miss := range []int64{-5, 1 << 40, math.MinInt64 + 3} {
				if _, in := model[miss]; !in {
					if ord, ok := s.Find(int64Key(uint64(miss) ^ signBit)); ok {
						t.Fatalf("Find(%d) = %d, want none", miss, ord)
					}
				}
			}
		})
	}
}

// TestKeySetSeenConcurrentFinds: Finds racing on a set whose table is
// owed build it once and all find every key (run with -race).
func TestKeySetSeenConcurrentFinds(t *testing.T) {
	xs := make([]int64, 50_000)
	for i, p := range rand.New(rand.NewPCG(11, 12)).Perm(1_000_000)[:len(xs)] {
		xs[i] = int64(p)
	}
	s := NewLazyKeySet(len(xs))
	s.AddInt64s(xs, nil)
	if !s.lazy.Load() {
		t.Fatal("the table was built before any lookup")
	}
	var wg sync.WaitGroup
	errs := make([]int, 4)
	for g := range errs {
		wg.Go(func() {
			for i, x := range xs {
				if ord, ok := s.Find(int64Key(uint64(x) ^ signBit)); !ok || ord != i {
					errs[g]++
				}
			}
		})
	}
	wg.Wait()
	for g, n := range errs {
		if n > 0 {
			t.Fatalf("goroutine %d: %d keys not found at their ordinal", g, n)
		}
	}
}

// TestKeySetSeenBounded: keys spread wider than seenBitsPerKey values a
// key never get a bitmap past that bound (hostile spans go to the hash
// table).
func TestKeySetSeenBounded(t *testing.T) {
	for _, xs := range [][]int64{
		{0, math.MaxInt64},
		{math.MinInt64, math.MaxInt64, 0},
		{0, 1 << 20, 1 << 21, 3 << 20}, // 2^20 values a key, hint 0
	} {
		s := NewLazyKeySet(0)
		s.AddInt64s(xs, nil)
		if b := 8 * cap(s.seen); b > seenBitsPerKey*(1<<10)/8*2 {
			t.Errorf("%v: a bitmap of %d bytes", xs, b)
		}
		if s.Len() != len(xs) {
			t.Errorf("%v: Len %d", xs, s.Len())
		}
	}
}

// TestKeySetSeenEitherOrder: keys arriving in descending batches grow
// the bitmap downward with room, as ascending ones grow it upward: a
// logarithmic number of copies, not one per batch.
func TestKeySetSeenEitherOrder(t *testing.T) {
	for _, desc := range []bool{false, true} {
		s := NewLazyKeySet(0)
		copies, last := 0, (*uint64)(nil)
		for b := range 2000 {
			xs := make([]int64, 1000)
			for i := range xs {
				k := int64(b*1000 + i)
				if desc {
					k = -k
				}
				xs[i] = 16 * k
			}
			s.AddInt64s(xs, nil)
			if len(s.seen) > 0 && &s.seen[0] != last {
				copies, last = copies+1, &s.seen[0]
			}
		}
		if !s.lazy.Load() || s.Len() != 2_000_000 || copies > 40 {
			t.Errorf("descending %v: table owed %v, %d keys, the bitmap copied %d times", desc, s.lazy.Load(), s.Len(), copies)
		}
	}
}

// TestKeySetNotLazy: a set made by NewKeySet (a key index: looked up as
// much as filled) builds its table as keys come, and counts it.
func TestKeySetNotLazy(t *testing.T) {
	s := NewKeySet(0)
	xs := make([]int64, 10_000)
	for i := range xs {
		xs[i] = int64(10 * i)
	}
	s.AddInt64s(xs, nil)
	if s.lazy.Load() || len(s.slots) == 0 || s.MemoryBytes() < 8*len(s.slots) {
		t.Fatalf("table owed %v, %d slots, %d bytes counted", s.lazy.Load(), len(s.slots), s.MemoryBytes())
	}
}

package merge

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestKeySetDense: sets of 8-byte keys that span few values per key
// (ids) number them through the direct table; a key far outside the span,
// or of another width, moves the set to the hash table. In every case the
// ordinals, Find, Key and Len equal a map's, before and after the move.
func TestKeySetDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	base := uint64(1) << 63 // KeyEncoder's 0 for an int64
	cases := map[string]struct {
		keys   func() [][]byte
		hashed bool // the set must end in the hash table
	}{
		"ascending ids": {func() (ks [][]byte) {
			for i := range 200_000 {
				ks = append(ks, int64Key(base+uint64(i)))
			}
			return
		}, false},
		"shuffled ids, duplicates, descending start": {func() (ks [][]byte) {
			for range 300_000 {
				ks = append(ks, int64Key(base-uint64(rng.IntN(100_000))))
			}
			return
		}, false},
		"ids every 3": {func() (ks [][]byte) {
			for i := range 100_000 {
				ks = append(ks, int64Key(base+3*uint64(i)))
			}
			return
		}, false},
		"ids every 1000 (timestamps)": {func() (ks [][]byte) {
			for i := range 100_000 {
				ks = append(ks, int64Key(base+1000*uint64(i)))
			}
			return
		}, true},
		"ids then one far key then ids": {func() (ks [][]byte) {
			for i := range 50_000 {
				ks = append(ks, int64Key(base+uint64(i)))
			}
			ks = append(ks, int64Key(1))
			for i := range 50_000 {
				ks = append(ks, int64Key(base+uint64(i)*2))
			}
			return
		}, true},
		"ids then a 4-byte key": {func() (ks [][]byte) {
			for i := range 1000 {
				ks = append(ks, int64Key(base+uint64(i)))
			}
			return append(ks, []byte("abcd"), int64Key(base+5), int64Key(base+1_000_000))
		}, true},
		"the extremes of uint64": {func() [][]byte {
			return [][]byte{int64Key(0), int64Key(1), int64Key(^uint64(0)), int64Key(^uint64(0) - 1), int64Key(0)}
		}, true},
		"top of uint64 only": {func() [][]byte {
			return [][]byte{int64Key(^uint64(0)), int64Key(^uint64(0) - 3), int64Key(^uint64(0) - 1), int64Key(^uint64(0))}
		}, false},
	}
	for name, tc := range cases {
		for _, bulk := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/AddInt64s=%v", name, bulk), func(t *testing.T) {
				testKeySetDense(t, tc.keys(), tc.hashed, bulk, rng)
			})
		}
	}
}

// testKeySetDense adds keys to a set, one by one or (bulk) runs of 8-byte
// keys of random length through AddInt64s, and checks it against a map.
func testKeySetDense(t *testing.T, keys [][]byte, hashed, bulk bool, rng *rand.Rand) {
	base := uint64(1) << 63
	s := NewKeySet(len(keys)) // as callers do: the size hint bounds the span early on
	model := map[string]int{}
	check := func(i int, k []byte, ord int, added, checkAdded bool) {
		t.Helper()
		want, had := model[string(k)]
		if !had {
			want = len(model)
			model[string(k)] = want
		}
		if ord != want || checkAdded && added == had {
			t.Fatalf("key %d (%x): Add = %d, %v; want %d, %v", i, k, ord, added, want, !had)
		}
	}
	for i := 0; i < len(keys); {
		if !bulk || len(keys[i]) != 8 {
			ord, added := s.Add(keys[i])
			check(i, keys[i], ord, added, true)
			i++
			continue
		}
		var xs []int64
		for j, run := i, 1+rng.IntN(70_000); j < len(keys) && len(keys[j]) == 8 && len(xs) < run; j++ {
			xs = append(xs, int64(binary.BigEndian.Uint64(keys[j])^base))
		}
		for j, ord := range s.AddInt64s(xs, nil) {
			check(i+j, keys[i+j], int(ord), false, false)
		}
		i += len(xs)
	}
	if s.Len() != len(model) || s.hashed != hashed {
		t.Fatalf("Len %d (want %d), hashed %v (want %v)", s.Len(), len(model), s.hashed, hashed)
	}
	for k, ord := range model {
		if got, ok := s.Find([]byte(k)); !ok || got != ord || string(s.Key(ord)) != k {
			t.Fatalf("Find(%x) = %d, %v; Key = %x; want %d", k, got, ok, s.Key(ord), ord)
		}
	}
	for _, miss := range [][]byte{int64Key(base - 1_000_000), int64Key(base + 10_000_000), int64Key(0), []byte("xyz")} {
		if _, in := model[string(miss)]; in {
			continue
		}
		if ord, ok := s.Find(miss); ok {
			t.Fatalf("Find(%x) = %d, want none", miss, ord)
		}
	}
	m := NewKeyMatcher(s)
	for k, ord := range model {
		if got, ok := m.Find([]byte(k)); !ok || got != ord {
			t.Fatalf("matcher Find(%x) = %d, %v; want %d", k, got, ok, ord)
		}
	}
}

// BenchmarkKeySetAddInt64: 2M ids, shuffled and sorted (the direct
// table), and 2M keys spread 1,000 apart (timestamps: the hash table).
func BenchmarkKeySetAddInt64(b *testing.B) {
	const n = 2_000_000
	ids := make([][]byte, n)
	for i, p := range rand.New(rand.NewPCG(1, 2)).Perm(n) {
		ids[i] = int64Key(1<<63 + uint64(p))
	}
	ts := make([][]byte, n)
	for i := range ts {
		ts[i] = int64Key(1<<63 + 1000*uint64(i))
	}
	sorted := make([][]byte, n)
	for i := range sorted {
		sorted[i] = int64Key(1<<63 + uint64(i))
	}
	for name, keys := range map[string][][]byte{"ids-shuffled": ids, "ids-sorted": sorted, "spread": ts} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				s := NewKeySet(n)
				for _, k := range keys {
					s.Add(k)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
		b.Run(name+"/AddInt64s", func(b *testing.B) {
			xs := make([]int64, n)
			for i, k := range keys {
				xs[i] = int64(binary.BigEndian.Uint64(k) ^ 1<<63)
			}
			var ords []int32
			for b.Loop() {
				s := NewKeySet(n)
				for lo := 0; lo < n; lo += 4096 { // a page of a key column at a time
					ords = s.AddInt64s(xs[lo:min(lo+4096, n)], ords[:0])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}

// TestKeySetHostileHint: a size hint from another process's file (a
// manifest claiming 2^40 rows) reserves nothing beyond MaxSizeHint, whether
// the keys stay dense or not.
func TestKeySetHostileHint(t *testing.T) {
	for _, keys := range [][][]byte{
		{int64Key(0), int64Key(1 << 30)},                      // sparse: the direct table may not span it
		{int64Key(5), []byte("not eight bytes"), int64Key(6)}, // to the hash table
	} {
		s := NewKeySet(1 << 40)
		for _, k := range keys {
			s.Add(k)
		}
		if b := s.MemoryBytes(); b > 16*MaxSizeHint*4 {
			t.Errorf("%d keys hold %d bytes", len(keys), b)
		}
	}
}

// TestAddInt64sIsKeyEncoder: AddInt64s numbers an int64 column's values
// as Add numbers the keys KeyEncoder makes of them (negative values and
// the extremes included), and stores the same key bytes; KeyInt64 gives
// each value back from its key.
func TestAddInt64sIsKeyEncoder(t *testing.T) {
	vals := []int64{5, -1, 0, math.MinInt64, math.MaxInt64, 5, -7, 1 << 40, -1}
	enc := int64Keys(t, vals)
	bulk, one := NewKeySet(0), NewKeySet(0)
	ords := bulk.AddInt64s(vals, nil)
	for i := range vals {
		ord, _ := one.Add(enc.Key(i))
		if int(ords[i]) != ord || !bytes.Equal(bulk.Key(ord), enc.Key(i)) {
			t.Fatalf("value %d: AddInt64s ordinal %d key %x, Add of the encoded key %d key %x", vals[i], ords[i], bulk.Key(int(ords[i])), ord, enc.Key(i))
		}
		if got := KeyInt64(enc.Key(i)); got != vals[i] {
			t.Fatalf("KeyInt64 of %d's key = %d", vals[i], got)
		}
	}
}

// TestAddInt64sHashedGrows: a hashed set with no size hint, filled by
// AddInt64s batches and single Adds of the same keys (duplicates within
// and across batches), grows through many rehashes and numbers every key
// as a map does.
func TestAddInt64sHashedGrows(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	pool := make([]int64, 40_000)
	for i := range pool {
		pool[i] = int64(rng.Uint64())
	}
	s := NewKeySet(0)
	model := map[int64]int{}
	want := func(x int64) int {
		if ord, ok := model[x]; ok {
			return ord
		}
		model[x] = len(model)
		return len(model) - 1
	}
	for range 200 {
		if rng.IntN(4) == 0 {
			x := pool[rng.IntN(len(pool))]
			if ord, _ := s.Add(int64Key(uint64(x) ^ signBit)); ord != want(x) {
				t.Fatalf("Add(%d) = %d, want %d", x, ord, model[x])
			}
			continue
		}
		xs := make([]int64, 1+rng.IntN(2000))
		for i := range xs {
			xs[i] = pool[rng.IntN(len(pool))]
		}
		for i, ord := range s.AddInt64s(xs, nil) {
			if int(ord) != want(xs[i]) {
				t.Fatalf("AddInt64s: %d numbered %d, want %d", xs[i], ord, model[xs[i]])
			}
		}
	}
	if !s.hashed || s.Len() != len(model) || len(s.slots)*3/4 < s.Len() {
		t.Fatalf("hashed %v, Len %d (want %d), %d slots", s.hashed, s.Len(), len(model), len(s.slots))
	}
	for x, ord := range model {
		k := int64Key(uint64(x) ^ signBit)
		if got, ok := s.Find(k); !ok || got != ord || !bytes.Equal(s.Key(ord), k) {
			t.Fatalf("Find(%d) = %d, %v, want %d", x, got, ok, ord)
		}
	}
}

// BenchmarkKeySetMergeSource: the keys of a merge source as a stream
// brings them: 100,000 updates spread over 2M ids, then 100,000 new ids,
// 65,536 at a time (too sparse for the direct table).
func BenchmarkKeySetMergeSource(b *testing.B) {
	const n = 200_000
	xs := make([]int64, n)
	for i, p := range rand.New(rand.NewPCG(1, 2)).Perm(2_000_000)[:n/2] {
		xs[i] = int64(p)
	}
	for i := n / 2; i < n; i++ {
		xs[i] = int64(2_000_000 + i)
	}
	var ords []int32
	for b.Loop() {
		s := NewLazyKeySet(4 * 65536)
		for lo := 0; lo < n; lo += 65536 {
			ords = s.AddInt64s(xs[lo:min(lo+65536, n)], ords[:0])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
}

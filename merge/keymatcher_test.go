package merge

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// int64Key encodes v as a fixed-width key, as KeyEncoder does for one
// int64 column.
func int64Key(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// TestKeyMatcherAgreesWithSet: for sets of several sizes (empty included),
// the matcher answers exactly what the set answers, for keys in the set and
// keys outside it; its filter screens out most missing keys.
func TestKeyMatcherAgreesWithSet(t *testing.T) {
	for _, n := range []int{0, 1, 1000, 100_000} {
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		s := NewKeySet(n)
		for range n {
			s.Add(int64Key(rng.Uint64() | 1)) // odd: present
		}
		m := NewKeyMatcher(s)
		for ord := range s.Len() {
			if !m.Contains(s.Key(ord)) {
				t.Fatalf("n=%d: key %d of the set not contained", n, ord)
			}
		}
		screened, probes := 0, 20_000
		for range probes {
			k := int64Key(rng.Uint64() &^ 1) // even: absent
			if m.Contains(k) {
				t.Fatalf("n=%d: absent key %x contained", n, k)
			}
			if m.dense != nil {
				continue // exact: TestKeyMatcherDense
			}
			block, b1, b2, b3 := m.bits(s.hash(k))
			if block[b1>>6]&(1<<(b1&63)) == 0 || block[b2>>6]&(1<<(b2&63)) == 0 || block[b3>>6]&(1<<(b3&63)) == 0 {
				screened++
			}
		}
		if n > 1 && screened < probes*95/100 {
			t.Errorf("n=%d: the filter screened %d of %d absent keys, want at least 95%%", n, screened, probes)
		}
	}
}

// TestKeyMatcherDense: a set of 8-byte keys spanning few values (ids
// spread over a table plus new ones after it, around the int64 sign as
// KeyEncoder flips it) gets the exact filter and answers what the set
// answers at its edges, outside them and for keys of another width; a set
// spanning more than 64 values a key keeps the Bloom filter.
func TestKeyMatcherDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	base := uint64(1<<63 - 50_000) // int64 -50,000 as KeyEncoder encodes it
	s := NewKeySet(0)
	for i := range uint64(10_000) {
		s.Add(int64Key(base + i*10 + rng.Uint64N(3))) // spread
		s.Add(int64Key(base + 100_000 + i))           // new, dense
	}
	m := NewKeyMatcher(s)
	if m.dense == nil {
		t.Fatal("a set spanning 5 values a key has no dense filter")
	}
	probe := func(k []byte) {
		wantOrd, want := s.Find(k)
		if ord, got := m.Find(k); got != want || ord != wantOrd {
			t.Fatalf("key %x: matcher (%d, %v), set (%d, %v)", k, ord, got, wantOrd, want)
		}
	}
	for v := base - 100; v < base+110_100; v++ {
		probe(int64Key(v))
	}
	for range 10_000 {
		probe(int64Key(rng.Uint64()))
	}
	probe([]byte{1, 2, 3, 4})
	probe(nil)

	wide := NewKeySet(0)
	for i := range uint64(1000) {
		wide.Add(int64Key(i * 65))
	}
	if NewKeyMatcher(wide).dense != nil {
		t.Fatal("a set spanning 65 values a key got a dense filter")
	}
	mixed := NewKeySet(0)
	mixed.Add(int64Key(1))
	mixed.Add([]byte("a longer key"))
	if mm := NewKeyMatcher(mixed); mm.dense != nil || !mm.Contains(int64Key(1)) || !mm.Contains([]byte("a longer key")) {
		t.Fatal("a set of keys of two widths: dense filter, or a key lost")
	}
}

// BenchmarkKeyMatch probes a 200,000-key set with 2,000,000 int64 keys of
// which 5% are in the set (a Delta upsert's key scan), through the set
// alone and through the matcher: keys 200 apart (the Bloom filter), and
// 100,000 keys 20 apart plus 100,000 new ones after them (a changelog of
// updates spread over a 2,000,000-row table and inserts: the dense filter).
func BenchmarkKeyMatch(b *testing.B) {
	const setKeys, probes = 200_000, 2_000_000
	s := NewKeySet(setKeys)
	for i := range uint64(setKeys) {
		s.Add(int64Key(i * 200))
	}
	ids := NewKeySet(setKeys)
	for i := range uint64(setKeys / 2) {
		ids.Add(int64Key(i * 20))
		ids.Add(int64Key(probes + i))
	}
	// One arena, as a KeyEncoder holds a batch's keys; every 20th probe
	// is a multiple of 200 below 40M, in the set.
	arena := make([]byte, 0, 8*probes)
	for i := range uint64(probes) {
		arena = binary.BigEndian.AppendUint64(arena, i*10*(1+i%2))
	}
	keys := make([][]byte, probes)
	for i := range keys {
		keys[i] = arena[8*i : 8*i+8 : 8*i+8]
	}
	for _, tc := range []struct {
		name     string
		contains func([]byte) bool
	}{
		{"set", func(k []byte) bool { _, ok := s.Find(k); return ok }},
		{"matcher", NewKeyMatcher(s).Contains},
		{"dense", NewKeyMatcher(ids).Contains},
	} {
		b.Run(tc.name, func(b *testing.B) {
			hits := 0
			for b.Loop() {
				hits = 0
				for _, k := range keys {
					if tc.contains(k) {
						hits++
					}
				}
			}
			if hits == 0 {
				b.Fatal("no probe hit the set")
			}
			b.ReportMetric(float64(probes*b.N)/b.Elapsed().Seconds(), "keys/s")
		})
	}
}

// TestFindInt64: FindInt64(x) answers as Find does for the key KeyEncoder
// makes of an int64 x, with a dense matcher (ids) and a Bloom one (spread
// values), for members and non-members at the edges.
func TestFindInt64(t *testing.T) {
	for name, members := range map[string][]int64{
		"dense":  {-3, -2, 0, 1, 5, 100},
		"spread": {math.MinInt64, -1 << 40, 0, 7, 1 << 50, math.MaxInt64},
	} {
		set := NewKeySet(len(members))
		enc := int64Keys(t, members)
		for i := range enc.Len() {
			set.Add(enc.Key(i))
		}
		m := NewKeyMatcher(set)
		probes := append([]int64{math.MinInt64, math.MinInt64 + 1, -4, -1, 2, 6, 99, 101, math.MaxInt64 - 1, math.MaxInt64}, members...)
		penc := int64Keys(t, probes)
		for i, x := range probes {
			want, wantOK := m.Find(penc.Key(i))
			if got, ok := m.FindInt64(x); got != want || ok != wantOK {
				t.Errorf("%s: FindInt64(%d) = %d, %v; Find = %d, %v", name, x, got, ok, want, wantOK)
			}
		}
	}
}

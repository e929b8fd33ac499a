package merge

import (
	"encoding/binary"
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
			block, b1, b2, b3 := m.bits(s.hash(k))
			if block[b1>>6]&(1<<(b1&63)) == 0 || block[b2>>6]&(1<<(b2&63)) == 0 || block[b3>>6]&(1<<(b3&63)) == 0 {
				screened++
			}
		}
		if n > 0 && screened < probes*95/100 {
			t.Errorf("n=%d: the filter screened %d of %d absent keys, want at least 95%%", n, screened, probes)
		}
	}
}

// BenchmarkKeyMatch probes a 200,000-key set with 2,000,000 int64 keys of
// which 5% are in the set (a Delta upsert's key scan), through the set
// alone and through the matcher.
func BenchmarkKeyMatch(b *testing.B) {
	const setKeys, probes = 200_000, 2_000_000
	s := NewKeySet(setKeys)
	for i := range uint64(setKeys) {
		s.Add(int64Key(i * 200))
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

package merge

import (
	"encoding/binary"
	"math"
)

// KeyMatcher finds which encoded target keys are in a KeySet: sinks use it
// to find the target rows a collapsed changelog replaces or deletes, where
// most target rows usually match nothing.
//
// A KeySet lookup of a missing key costs a cache miss once the set outgrows
// the CPU caches (about 70 ns for 200,000 keys). The matcher screens every
// key through a blocked Bloom filter first: one 64-byte block per key, 10
// bits per key, 3 bits set, so about 2% of missing keys reach the set. For
// 200,000 keys the filter is 256 KiB, small enough to stay in cache while
// millions of target rows stream past.
//
// A set of 8-byte keys (one int64, timestamp or float64 column) whose
// values, read as the big-endian numbers KeyEncoder makes of them, span at
// most 64 values per key (ids and sequence numbers: a changelog's updates
// spread over a table plus new ids after it) gets an exact filter instead:
// one bit per value of the span, tested without hashing the key (59 M
// against 34 M probes a second in BenchmarkKeyMatch).
//
// Build it once the set is complete: the set must not change afterwards.
// MatchRows and Contains are safe for concurrent use.
type KeyMatcher struct {
	set    *KeySet
	blocks []uint64 // 8 words (512 bits, one cache line) per block
	mask   uint64   // number of blocks - 1
	// dense, when not nil: bit v-lo is set for every key v of the set,
	// span = max-lo+1.
	dense    []uint64
	lo, span uint64
}

// denseValuesPerKey bounds the span of a dense filter: 64 values (8 bytes
// of bitmap) per key, what the set itself spends on a key.
const denseValuesPerKey = 64

const (
	bloomBitsPerKey = 10
	bloomBlockWords = 8
)

// NewKeyMatcher returns a matcher over the keys of set.
func NewKeyMatcher(set *KeySet) *KeyMatcher {
	if m := newDenseMatcher(set); m != nil {
		return m
	}
	blocks := 1
	for blocks*bloomBlockWords*64 < set.Len()*bloomBitsPerKey {
		blocks *= 2
	}
	m := &KeyMatcher{set: set, blocks: make([]uint64, blocks*bloomBlockWords), mask: uint64(blocks - 1)}
	for ord := range set.Len() {
		block, b1, b2, b3 := m.bits(set.hash(set.Key(ord)))
		block[b1>>6] |= 1 << (b1 & 63)
		block[b2>>6] |= 1 << (b2 & 63)
		block[b3>>6] |= 1 << (b3 & 63)
	}
	return m
}

// newDenseMatcher returns a matcher with a dense filter over set, or nil
// when its keys are not 8 bytes wide or span too many values.
func newDenseMatcher(set *KeySet) *KeyMatcher {
	if set.Len() == 0 || set.width != 8 {
		return nil
	}
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for ord := range set.Len() {
		v := binary.BigEndian.Uint64(set.Key(ord))
		lo, hi = min(lo, v), max(hi, v)
	}
	span := hi - lo + 1 // 0: the whole uint64 range
	if span == 0 || span/denseValuesPerKey > uint64(set.Len()) {
		return nil
	}
	m := &KeyMatcher{set: set, dense: make([]uint64, (span+63)/64), lo: lo, span: span}
	for ord := range set.Len() {
		v := binary.BigEndian.Uint64(set.Key(ord)) - lo
		m.dense[v>>6] |= 1 << (v & 63)
	}
	return m
}

// bits returns the block of hash h and the three bits (0..511) h sets in
// it. The block comes from the high half of h, the bits from the low.
func (m *KeyMatcher) bits(h uint64) (block []uint64, b1, b2, b3 uint64) {
	i := (h >> 32 & m.mask) * bloomBlockWords
	return m.blocks[i : i+bloomBlockWords : i+bloomBlockWords], h & 511, h >> 9 & 511, h >> 18 & 511
}

// Contains reports whether key is in the set.
func (m *KeyMatcher) Contains(key []byte) bool {
	_, ok := m.Find(key)
	return ok
}

// Find returns the ordinal of key in the set and true, or -1 and false
// (KeySet.Find).
func (m *KeyMatcher) Find(key []byte) (ord int, ok bool) {
	if m.dense != nil {
		if len(key) != 8 {
			return -1, false
		}
		if v := binary.BigEndian.Uint64(key) - m.lo; v >= m.span || m.dense[v>>6]&(1<<(v&63)) == 0 {
			return -1, false
		}
		return m.set.Find(key)
	}
	h := m.set.hash(key)
	block, b1, b2, b3 := m.bits(h)
	if block[b1>>6]&(1<<(b1&63)) == 0 || block[b2>>6]&(1<<(b2&63)) == 0 || block[b3>>6]&(1<<(b3&63)) == 0 {
		return -1, false
	}
	return m.set.findHashed(key, h)
}

// FindInt64 is Find for the key KeyEncoder makes of x when x is the
// value of a lone integer key column (8 bytes, big-endian, sign bit
// flipped): a dense matcher tests x against its bitmap without encoding it,
// and the set is searched only for the keys that pass.
func (m *KeyMatcher) FindInt64(x int64) (int, bool) {
	var k [8]byte
	v := uint64(x) ^ signBit
	binary.BigEndian.PutUint64(k[:], v)
	if m.dense == nil {
		return m.Find(k[:])
	}
	if d := v - m.lo; d >= m.span || m.dense[d>>6]&(1<<(d&63)) == 0 {
		return -1, false
	}
	return m.set.Find(k[:]) // passed the filter: not tested again
}

// MatchRows appends to rows the rows of enc's last Encode whose key is in
// the set, in row order, and to ords their keys' ordinals in the set, and
// returns the extended slices.
func (m *KeyMatcher) MatchRows(enc *KeyEncoder, rows, ords []int32) ([]int32, []int32) {
	for i := range enc.Len() {
		if ord, ok := m.Find(enc.Key(i)); ok {
			rows, ords = append(rows, int32(i)), append(ords, int32(ord))
		}
	}
	return rows, ords
}

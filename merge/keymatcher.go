package merge

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
// Build it once the set is complete: the set must not change afterwards.
// MatchRows and Contains are safe for concurrent use.
type KeyMatcher struct {
	set    *KeySet
	blocks []uint64 // 8 words (512 bits, one cache line) per block
	mask   uint64   // number of blocks - 1
}

const (
	bloomBitsPerKey = 10
	bloomBlockWords = 8
)

// NewKeyMatcher returns a matcher over the keys of set.
func NewKeyMatcher(set *KeySet) *KeyMatcher {
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
	h := m.set.hash(key)
	block, b1, b2, b3 := m.bits(h)
	if block[b1>>6]&(1<<(b1&63)) == 0 || block[b2>>6]&(1<<(b2&63)) == 0 || block[b3>>6]&(1<<(b3&63)) == 0 {
		return -1, false
	}
	return m.set.findHashed(key, h)
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

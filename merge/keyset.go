package merge

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// KeySet interns encoded keys (from a [KeyEncoder]) and numbers the distinct
// keys densely, 0..Len()-1, in first-added order.
//
// It is an open-addressing hash table over hashes seeded per set (so
// iteration never depends on hash order: ordinals do): maphash's, except
// for 8-byte keys (see hash). Memory per key:
// the key bytes, plus 8 bytes of offset unless every key has the same
// length (single or fixed-width key columns), plus 8-byte slots at a load
// factor between 3/8 and 3/4 (about 14 bytes on average): an int64 key
// costs about 22 bytes. Adding allocates only when the arena or the table
// grows.
//
// A set of 8-byte keys (one int64 or timestamp column, which KeyEncoder
// writes as order-preserving big-endian numbers) whose values span at most
// denseSlotsPerKey values per key — ids, sequence numbers — numbers them
// through a direct table instead: one 4-byte slot per value of the span,
// no hashing, and building or probing touches memory in key order (ids
// arrive sorted or clustered). The set moves to the hash table, for good,
// at the first key that breaks that.
//
// A set made by NewLazyKeySet goes further: keys added by AddInt64s that
// are too spread for the direct table but span at most seenBitsPerKey
// values per key (a merge source: updates spread over a table, new ids
// after it) are first only marked in a bitmap over their span, and
// numbered in the order they come. While no key repeats, ordinals need
// no table, and a source whose keys are never looked up (the key index
// looks them up in its own set) never builds one. The hash table is built
// from the keys when one repeats, one falls outside the span, or a lookup
// or Add needs it; until then MemoryBytes does not count it.
//
// The zero KeySet is not usable; call NewKeySet. Find, Key and Len may run
// concurrently with each other, not with Add.
type KeySet struct {
	seed  maphash.Seed
	mix   [2]uint64 // the seed of hash64
	arena []byte
	n     int
	// width is the length shared by every key so far (-1 once two lengths
	// were seen, -2 while empty): while keys are fixed-width, key i is
	// arena[i*width:] and offs is unused, saving 8 bytes and a cache miss
	// per key.
	width int
	offs  []uint64 // when width == -1, len n+1: key i is arena[offs[i]:offs[i+1]]
	// slots holds hash<<32 | (ordinal+1); 0 is empty. Comparing the stored
	// high hash bits first avoids touching the arena on most misses.
	slots []uint64
	mask  uint64
	// hint is the size hint, for sizing the arena once the first key
	// tells the key width, and the hash table once it is needed.
	hint int
	// direct, while the set is dense: direct[v-lo] is the ordinal+1 of
	// the key whose big-endian value is v (0: none). slots is unused then.
	direct []uint32
	lo     uint64
	hashed bool // the hash table is in use (no longer dense)
	// seen, while the hash table is owed (lazy): bit v-seenLo is set for
	// the key of big-endian value v; every key so far is distinct, and at
	// most seenHi.
	seen           []uint64
	seenLo, seenHi uint64
	lazy           atomic.Bool
	mu             sync.Mutex // builds the owed table once, under concurrent Finds
	mayOwe         bool       // the set may owe its table (NewLazyKeySet)
}

// Dense sets: a direct table of at most denseSlotsPerKey 4-byte slots per
// key (the hash table spends about 14 bytes a key), and never less than
// minDenseSlots, so that small sets do not leave it for a small gap.
const (
	denseSlotsPerKey = 4
	minDenseSlots    = 1 << 16
)

// seenBitsPerKey bounds the span of the bitmap of an owed table: 64
// values (8 bytes of bitmap) per key, what the key itself takes.
const seenBitsPerKey = 64

// maxArenaReserve bounds the arena NewKeySet's size hint reserves.
const maxArenaReserve = 64 << 20

// maxKeys bounds the ordinal to the 32 bits a slot holds.
const maxKeys = 1<<32 - 2

// MaxSizeHint bounds what a size hint may reserve or allow ahead of the keys
// themselves: hints come from files other processes wrote (a manifest's
// row count), and a set grows past it as keys arrive.
const MaxSizeHint = 1 << 22

// NewKeySet returns an empty set sized for about sizeHint keys (0 is fine).
func NewKeySet(sizeHint int) *KeySet {
	return &KeySet{seed: maphash.MakeSeed(), mix: [2]uint64{rand.Uint64(), rand.Uint64()}, width: -2, hint: min(max(sizeHint, 0), MaxSizeHint)}
}

// NewLazyKeySet returns an empty set sized for about sizeHint keys that
// builds its hash table only when it must (see KeySet): for sets filled
// far more than looked up.
func NewLazyKeySet(sizeHint int) *KeySet {
	s := NewKeySet(sizeHint)
	s.mayOwe = true
	return s
}

// rehash rebuilds the slot table with size slots.
func (s *KeySet) rehash(size int) {
	s.slots = make([]uint64, size)
	s.mask = uint64(size - 1)
	for ord := range s.n {
		h := s.hash(s.Key(ord))
		i := h & s.mask
		for s.slots[i] != 0 {
			i = (i + 1) & s.mask
		}
		s.slots[i] = h>>32<<32 | uint64(ord+1)
	}
}

// Len returns the number of distinct keys.
func (s *KeySet) Len() int { return s.n }

// Key returns the key of ordinal ord. The slice aliases the set's arena: it
// is valid until the next Add and must not be modified.
func (s *KeySet) Key(ord int) []byte {
	if w := s.width; w >= 0 {
		return s.arena[ord*w : (ord+1)*w : (ord+1)*w]
	}
	return s.arena[s.offs[ord]:s.offs[ord+1]:s.offs[ord+1]]
}

// MemoryBytes returns the bytes held by the set's buffers (capacity).
func (s *KeySet) MemoryBytes() int {
	return cap(s.arena) + 8*cap(s.offs) + 8*cap(s.slots) + 4*cap(s.direct) + 8*cap(s.seen)
}

// Find returns the ordinal of key and true, or -1 and false.
func (s *KeySet) Find(key []byte) (int, bool) {
	if !s.hashed {
		if s.n == 0 || len(key) != 8 {
			return -1, false
		}
		i := binary.BigEndian.Uint64(key) - s.lo
		if i >= uint64(len(s.direct)) || s.direct[i] == 0 {
			return -1, false
		}
		return int(s.direct[i]) - 1, true
	}
	return s.findHashed(key, s.hash(key))
}

// hash is the set's hash of key: the slot index in its low bits, the tag
// in its high 32.
func (s *KeySet) hash(key []byte) uint64 {
	if len(key) == 8 {
		return s.hash64(binary.BigEndian.Uint64(key))
	}
	return maphash.Bytes(s.seed, key)
}

// hash64 is the hash of an 8-byte key (one int64 or timestamp key column,
// the usual merge key) of big-endian value v: wyhash's seeded multiply
// and fold, twice. It is inlined, unlike maphash.Bytes: adding keys whose
// slots miss the caches, the core then works on the next keys while the
// misses are outstanding, and a large set fills three times faster.
func (s *KeySet) hash64(v uint64) uint64 {
	hi, lo := bits.Mul64(v^s.mix[0], 0xa0761d6478bd642f)
	hi, lo = bits.Mul64(hi^lo^s.mix[1], 0xe7037ed1a0b428db)
	return hi ^ lo
}

// findHashed is Find given h = s.hash(key).
func (s *KeySet) findHashed(key []byte, h uint64) (int, bool) {
	if !s.hashed {
		return s.Find(key) // a dense set: no hash needed
	}
	if s.lazy.Load() {
		s.table()
	}
	tag := h >> 32
	for i := h & s.mask; ; i = (i + 1) & s.mask {
		sl := s.slots[i]
		if sl == 0 {
			return -1, false
		}
		if sl>>32 == tag {
			if ord := int(sl&0xffffffff) - 1; bytes.Equal(s.Key(ord), key) {
				return ord, true
			}
		}
	}
}

// Add adds a copy of key if it is new. It returns the key's ordinal and
// whether it was added. key is borrowed. Add panics past 2^32-2 keys
// (about 100 GiB of table): bound the input before that.
func (s *KeySet) Add(key []byte) (int, bool) {
	if !s.hashed {
		if ord, added, ok := s.addDirect(key); ok {
			return ord, added
		}
		s.toHashed()
	}
	if s.lazy.Load() {
		s.table()
	}
	return s.addHashed(key, s.hash(key))
}

// addHashed is Add to the hash table given h = s.hash(key).
func (s *KeySet) addHashed(key []byte, h uint64) (int, bool) {
	tag := h >> 32
	i := h & s.mask
	for ; ; i = (i + 1) & s.mask {
		sl := s.slots[i]
		if sl == 0 {
			break
		}
		if sl>>32 == tag {
			if ord := int(sl&0xffffffff) - 1; bytes.Equal(s.Key(ord), key) {
				return ord, false
			}
		}
	}
	ord := s.newKey(key)
	s.slots[i] = tag<<32 | uint64(ord+1)
	if uint64(s.n) > (s.mask+1)*3/4 {
		s.rehash(2 * len(s.slots))
	}
	return ord, true
}

// AddInt64s adds the keys KeyEncoder makes of xs, the values of a lone
// int64 key column (8 bytes, big-endian, sign bit flipped), and appends
// each value's ordinal to ords, as Add would one by one (the set must stay
// within 2^31-1 keys: the ordinals are int32). It encodes no key
// per value: a dense set widens its direct table once to cover all of xs
// (or moves to the hash table when xs does not fit it) and numbers the
// values straight from it; a sparse set marks them in the bitmap of its
// owed table, while they do not repeat.
func (s *KeySet) AddInt64s(xs []int64, ords []int32) []int32 {
	if len(xs) == 0 {
		return ords
	}
	if s.n+len(xs) > math.MaxInt32 {
		panic("merge: AddInt64s numbers at most 2^31-1 keys; use Add")
	}
	var lo, hi uint64 // the span of xs, for a direct table or a bitmap
	if !s.hashed || s.lazy.Load() {
		lo, hi = int64Span(xs)
	}
	if !s.hashed {
		// The batch's own keys count toward the dense bound, as they
		// would added one by one; a batch as dense as the bound sizes
		// the table for the hint's keys at once.
		dense := hi-lo < uint64(denseSlotsPerKey*len(xs))
		if s.coverDense(lo, hi, s.n+len(xs), dense) {
			return s.addInt64sDirect(xs, ords)
		}
		if s.mayOwe {
			s.toSeen()
		} else {
			s.toHashed()
		}
	}
	if s.width == -2 {
		s.startArena(8)
	}
	if s.lazy.Load() {
		var done int
		ords, done = s.addInt64sSeen(xs, lo, hi, ords)
		if xs = xs[done:]; len(xs) == 0 {
			return ords
		}
		s.table() // a key repeats, or the keys spread too far
	}
	if s.width != 8 {
		var k [8]byte
		for _, x := range xs {
			binary.BigEndian.PutUint64(k[:], uint64(x)^signBit)
			ord, _ := s.Add(k[:])
			ords = append(ords, int32(ord))
		}
		return ords
	}
	return s.addInt64sHashed(xs, ords)
}

// int64Span returns the least and greatest big-endian key value of xs
// (not empty).
func int64Span(xs []int64) (lo, hi uint64) {
	lo = math.MaxUint64
	for _, x := range xs {
		v := uint64(x) ^ signBit
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// KeyInt64 is the value AddInt64s encodes as the 8-byte key: Add(key) and
// AddInt64s of KeyInt64(key) add the same key, whatever column type made
// it.
func KeyInt64(key []byte) int64 { return int64(binary.BigEndian.Uint64(key) ^ signBit) }

// addInt64sHashed is AddInt64s into the hash table of a set of 8-byte
// keys: Add's loop with the key compared as a number and appended in
// place. Kept this small, the loop lets the core run ahead to the next
// keys while one's slot misses the caches.
func (s *KeySet) addInt64sHashed(xs []int64, ords []int32) []int32 {
	slots, mask := s.slots, s.mask
	for _, x := range xs {
		v := uint64(x) ^ signBit
		h := s.hash64(v)
		tag := h >> 32
		i := h & mask
		ord := -1
		for sl := slots[i]; sl != 0; sl = slots[i] {
			if sl>>32 == tag {
				if o := int(sl&0xffffffff) - 1; binary.BigEndian.Uint64(s.arena[8*o:]) == v {
					ord = o
					break
				}
			}
			i = (i + 1) & mask
		}
		if ord < 0 {
			if s.n >= maxKeys {
				panic("merge: KeySet holds 2^32-2 keys; bound the input")
			}
			ord = s.n
			s.arena = binary.BigEndian.AppendUint64(s.arena, v)
			s.n++
			slots[i] = tag<<32 | uint64(s.n)
			if uint64(s.n) > (mask+1)*3/4 {
				s.rehash(2 * len(slots))
				slots, mask = s.slots, s.mask
			}
		}
		ords = append(ords, int32(ord))
	}
	return ords
}

// addInt64sDirect is AddInt64s into the direct table, which covers xs:
// addCovered in one loop, with each key appended as a number (building a
// 2M-key index spent two thirds of its time in the calls per key).
func (s *KeySet) addInt64sDirect(xs []int64, ords []int32) []int32 {
	if s.width == -2 {
		s.startArena(8)
	}
	direct, lo := s.direct, s.lo
	for _, x := range xs {
		v := uint64(x) ^ signBit
		slot := &direct[v-lo]
		if *slot == 0 {
			s.arena = binary.BigEndian.AppendUint64(s.arena, v)
			s.n++
			*slot = uint32(s.n)
		}
		ords = append(ords, int32(*slot)-1)
	}
	return ords
}

// addDirect adds key to the direct table, growing it; ok is false when
// the key does not fit a dense set (the set must move to the hash table).
func (s *KeySet) addDirect(key []byte) (ord int, added, ok bool) {
	if len(key) != 8 {
		return 0, false, false
	}
	v := binary.BigEndian.Uint64(key)
	if !s.coverDense(v, v, s.n+1, false) {
		return 0, false, false
	}
	ord, added = s.addCovered(v)
	return ord, added, true
}

// addCovered adds the key of big-endian value v, which the direct table
// covers, and returns its ordinal and whether it was added.
func (s *KeySet) addCovered(v uint64) (ord int, added bool) {
	slot := &s.direct[v-s.lo]
	if *slot != 0 {
		return int(*slot) - 1, false
	}
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], v)
	ord = s.newKey(k[:])
	*slot = uint32(ord + 1)
	return ord, true
}

// newKey stores a copy of key as the next ordinal and returns it; it
// panics past maxKeys.
func (s *KeySet) newKey(key []byte) int {
	if s.n >= maxKeys {
		panic("merge: KeySet holds 2^32-2 keys; bound the input")
	}
	s.appendKey(key)
	return s.n - 1
}

// coverDense makes the direct table cover the values lo..hi (inclusive),
// growing it, and reports whether it could: false when the span would
// pass the dense bound for keys keys or the set is full (it must move to
// the hash table). ahead sizes a new table for the hint's keys.
func (s *KeySet) coverDense(lo, hi uint64, keys int, ahead bool) bool {
	if len(s.direct) > 0 && lo >= s.lo && hi-s.lo < uint64(len(s.direct)) {
		return true
	}
	return s.growDirect(lo, hi, keys, ahead)
}

// growDirect widens the direct table to cover lo..hi, and room for the
// keys that follow on the side it grows (as much again or, ahead, what
// the size hint expects), unless the span would pass the dense bound of
// keys keys. Bounds are inclusive: the span may reach either end of
// uint64.
func (s *KeySet) growDirect(lo, hi uint64, keys int, ahead bool) bool {
	last := hi
	if len(s.direct) > 0 {
		lo, last = min(s.lo, lo), max(s.lo+uint64(len(s.direct)-1), hi)
	}
	limit := uint64(max(minDenseSlots, denseSlotsPerKey*max(keys, s.hint)))
	if last-lo >= limit || s.n >= maxKeys {
		return false
	}
	size := last - lo + 1
	// The hint's keys, if they continue a dense batch's span as densely:
	// the whole table in one allocation (page faults and copies of the
	// doublings cost more than a table sized ahead).
	var expect uint64
	if ahead {
		expect = uint64(s.hint) - min(uint64(s.hint), size)
	}
	extra := min(max(size, uint64(len(s.direct)), expect), limit-size)
	if len(s.direct) > 0 && lo < s.lo {
		lo -= min(extra, lo)
	} else {
		last += min(extra, math.MaxUint64-last)
	}
	direct := make([]uint32, last-lo+1)
	if len(s.direct) > 0 {
		copy(direct[s.lo-lo:], s.direct)
	}
	s.direct, s.lo = direct, lo
	return true
}

// toHashed moves the set from the direct table to the hash table.
func (s *KeySet) toHashed() {
	s.hashed = true
	s.direct = nil
	s.rehash(s.tableSize())
}

// tableSize is the size of a hash table built for the set's keys and
// hint.
func (s *KeySet) tableSize() int {
	size := 16
	for size*3/4 < max(s.n+1, s.hint) {
		size *= 2
	}
	return size
}

// toSeen moves the set from the direct table to the owed hash table (its
// keys, all 8 bytes wide, marked in seen).
func (s *KeySet) toSeen() {
	s.hashed = true
	s.direct = nil
	s.lazy.Store(true)
	s.seen, s.seenLo, s.seenHi = nil, 0, 0
	if lo, hi := s.keySpan(); s.n > 0 && !s.coverSeen(lo, hi, s.n) {
		s.table()
		return
	}
	for ord := range s.n {
		d := binary.BigEndian.Uint64(s.arena[8*ord:]) - s.seenLo
		s.seen[d>>6] |= 1 << (d & 63)
	}
}

// keySpan returns the least and greatest value of the set's keys (8
// bytes wide, at least one).
func (s *KeySet) keySpan() (lo, hi uint64) {
	lo = math.MaxUint64
	for ord := range s.n {
		v := binary.BigEndian.Uint64(s.arena[8*ord:])
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// coverSeen makes the bitmap of the owed table cover the values lo..hi
// (inclusive), growing it, and reports whether it could: false when the
// span would pass seenBitsPerKey values per key for keys keys (or the
// hint).
func (s *KeySet) coverSeen(lo, hi uint64, keys int) bool {
	if len(s.seen) > 0 {
		last := s.seenLo + 64*uint64(len(s.seen)) - 1 // within uint64: see below
		if lo >= s.seenLo && hi <= last {
			s.seenHi = max(s.seenHi, hi)
			return true
		}
		lo, hi = min(lo, s.seenLo), max(hi, s.seenHi)
	}
	lo &^= 63
	limit := uint64(seenBitsPerKey) * uint64(max(keys, s.hint, 1<<10))
	if hi-lo >= limit {
		return false
	}
	// Whole words from lo (a multiple of 64), so the last bit is at most
	// math.MaxUint64; and room for as much again on the side it grows
	// (below, when keys came under the bitmap; else above: ids count up),
	// within the limit and uint64, so that keys arriving in either order
	// copy the bitmap a logarithmic number of times.
	words := (hi-lo)/64 + 1
	extra := min(words, (limit-(hi-lo))/64)
	if len(s.seen) > 0 && lo < s.seenLo {
		below := min(extra, lo/64)
		lo -= 64 * below
		words += below
	} else {
		last := lo + 64*words - 1
		words += min(extra, (math.MaxUint64-last)/64)
	}
	seen := make([]uint64, words)
	if len(s.seen) > 0 {
		copy(seen[(s.seenLo-lo)/64:], s.seen)
	}
	s.seen, s.seenLo, s.seenHi = seen, lo, hi
	return true
}

// addInt64sSeen is AddInt64s while the table is owed: each value, if
// not marked yet, is marked, stored and numbered next. It stops at the
// first value that repeats, or before xs (whose values span lo..hi) when
// the bitmap cannot cover them, and returns the ordinals and how many
// values it added.
func (s *KeySet) addInt64sSeen(xs []int64, lo, hi uint64, ords []int32) ([]int32, int) {
	if !s.coverSeen(lo, hi, s.n+len(xs)) {
		return ords, 0
	}
	seen, base := s.seen, s.seenLo
	for i, x := range xs {
		v := uint64(x) ^ signBit
		d := v - base
		if seen[d>>6]&(1<<(d&63)) != 0 {
			return ords, i
		}
		seen[d>>6] |= 1 << (d & 63)
		s.arena = binary.BigEndian.AppendUint64(s.arena, v)
		ords = append(ords, int32(s.n))
		s.n++
	}
	return ords, len(xs)
}

// table builds the owed hash table from the keys, if it is still owed.
// Finds may call it concurrently: one builds, the others wait.
func (s *KeySet) table() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lazy.Load() {
		s.seen = nil
		s.rehash(s.tableSize())
		s.lazy.Store(false)
	}
}

// startArena makes the empty set's keys width bytes wide, for now.
func (s *KeySet) startArena(width int) {
	s.width = width
	// Size the arena for the hinted keys at this width (at most
	// maxArenaReserve: the first key may be longer than most): building
	// a large set then copies no arena on the way.
	s.arena = make([]byte, 0, min(s.hint*width, maxArenaReserve))
}

// appendKey stores a copy of key as ordinal s.n.
func (s *KeySet) appendKey(key []byte) {
	switch {
	case s.width == -2:
		s.startArena(len(key))
	case s.width >= 0 && len(key) != s.width:
		// Keys stop being fixed-width: materialize the offsets.
		s.offs = make([]uint64, s.n+1, 2*s.n+2)
		for i := range s.offs {
			s.offs[i] = uint64(i * s.width)
		}
		s.width = -1
	}
	s.arena = append(s.arena, key...)
	if s.width == -1 {
		s.offs = append(s.offs, uint64(len(s.arena)))
	}
	s.n++
}

// KeyIndex maps encoded keys to uint64 values (a row address, a file and
// row number, an output position). Memory per key: a KeySet entry plus 8
// bytes. The zero KeyIndex is not usable; call NewKeyIndex. Get may run
// concurrently with Get, not with Put.
type KeyIndex struct {
	set  *KeySet
	vals []uint64
}

// NewKeyIndex returns an empty index sized for about sizeHint keys.
func NewKeyIndex(sizeHint int) *KeyIndex {
	return &KeyIndex{set: NewKeySet(sizeHint), vals: make([]uint64, 0, sizeHint)}
}

// Put sets the value of key (borrowed; copied when new) and returns the
// previous value and whether there was one.
func (x *KeyIndex) Put(key []byte, v uint64) (old uint64, replaced bool) {
	ord, added := x.set.Add(key)
	if added {
		x.vals = append(x.vals, v)
		return 0, false
	}
	old, x.vals[ord] = x.vals[ord], v
	return old, true
}

// Get returns the value of key and whether it is present.
func (x *KeyIndex) Get(key []byte) (uint64, bool) {
	ord, ok := x.set.Find(key)
	if !ok {
		return 0, false
	}
	return x.vals[ord], true
}

// Len returns the number of keys.
func (x *KeyIndex) Len() int { return x.set.Len() }

// Keys returns the index's key set: ordinal i holds the i-th distinct key
// put, and Value(i) its value.
func (x *KeyIndex) Keys() *KeySet { return x.set }

// Value returns the value of ordinal ord of Keys.
func (x *KeyIndex) Value(ord int) uint64 { return x.vals[ord] }

// MemoryBytes returns the bytes held by the index's buffers (capacity).
func (x *KeyIndex) MemoryBytes() int { return x.set.MemoryBytes() + 8*cap(x.vals) }

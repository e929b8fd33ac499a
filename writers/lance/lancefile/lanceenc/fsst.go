package lanceenc

import (
	"encoding/binary"
	"slices"
	"sync"
)

// FSST (Boncz, Neumann, Leis: "FSST: Fast Random Access String
// Compression", VLDB 2020) replaces the substrings of a page's values that
// recur most with one-byte codes of a table of at most 255 symbols of 1 to
// 8 bytes; code 255 escapes a literal byte. Lance compresses a mini-block
// page of strings this way when its longest value has 5 bytes or more and
// its values 32 KiB or more, and stores the table in the page's encoding.

const (
	fsstEscape      = 255
	fsstMaxSymbols  = 255
	fsstTableBytes  = 8 + 256*8 + 256 // Lance's readers want exactly this size
	fsstMagic       = 0x46535354 << 32
	fsstSampleBytes = 16 << 10
	fsstHashBits    = 10
	// fsstMinBytes and fsstMinWidest are when Lance compresses a page's
	// values with FSST.
	fsstMinBytes  = 32 << 10
	fsstMinWidest = 5
)

// fsstSymbol is up to 8 bytes, little-endian in val.
type fsstSymbol struct {
	val uint64
	n   uint8
}

// fsstTable finds, at each position of a value, the longest symbol that
// starts there: symbols of 3 to 8 bytes by a hash of their first three
// bytes (one per hash slot), of 1 or 2 bytes by their bytes.
type fsstTable struct {
	syms []fsstSymbol // by code
	long [1 << fsstHashBits]struct {
		val, mask uint64 // a free slot matches nothing: mask 0, val 1
		n, code   uint8
	}
	short [1 << 16]uint16 // two bytes: 2<<8 | their symbol's code, or 0
	one   [256]uint16     // a byte: 1<<8 | its symbol's code, or 0 (escape)
	// fast is short with every free entry taking its first byte's symbol
	// or, without one, fsstEscaped (made by fill, for compress).
	fast []uint16
}

// fsstEscaped is a fast entry that escapes one byte: the escape code, the
// byte taken and a second byte written.
const fsstEscaped = 1<<12 | 1<<8 | fsstEscape

func fsstHash(w uint64) int {
	return int((w & 0xFFFFFF) * 0x9E3779B97F4A7C15 >> (64 - fsstHashBits))
}

func lowBytes(n uint8) uint64 {
	if n >= 8 {
		return ^uint64(0)
	}
	return 1<<(8*n) - 1
}

// set makes syms (in code order) the table's symbols; a symbol of 3 bytes
// or more whose hash slot is taken is left out, as FSST does.
func (t *fsstTable) set(syms []fsstSymbol) {
	for _, s := range t.syms { // clear what the last symbols set
		switch {
		case s.n >= 3:
			slot := &t.long[fsstHash(s.val)]
			slot.val, slot.mask, slot.n = 1, 0, 0
		case s.n == 2:
			t.short[s.val&0xFFFF] = 0
		default:
			t.one[s.val&0xFF] = 0
		}
	}
	t.syms = t.syms[:0]
	for _, s := range syms {
		if len(t.syms) == fsstMaxSymbols {
			break
		}
		code := uint8(len(t.syms))
		switch {
		case s.n >= 3:
			slot := &t.long[fsstHash(s.val)]
			if slot.mask != 0 {
				continue
			}
			slot.val, slot.mask, slot.n, slot.code = s.val, lowBytes(s.n), s.n, code
		case s.n == 2:
			t.short[s.val&0xFFFF] = 2<<8 | uint16(code)
		default:
			t.one[s.val&0xFF] = 1<<8 | uint16(code)
		}
		t.syms = append(t.syms, s)
	}
}

// load reads 8 bytes of data at p: past its length, what its capacity
// holds (lookups check what belongs to the value), zeros past that.
func load(data []byte, p int) uint64 {
	if p+8 <= cap(data) {
		return binary.LittleEndian.Uint64(data[p : p+8])
	}
	var b [8]byte
	copy(b[:], data[p:])
	return binary.LittleEndian.Uint64(b[:])
}

// match returns the code and length of the longest symbol at the start of
// w, of which left bytes belong to the value (length 0: escape).
func (t *fsstTable) match(w uint64, left int) (code uint8, n int) {
	if s := &t.long[fsstHash(w)]; int(s.n) <= left && w&s.mask == s.val {
		return s.code, int(s.n)
	}
	var c uint16
	if left >= 2 {
		c = t.short[w&0xFFFF]
	}
	if c == 0 {
		c = t.one[w&0xFF]
	}
	return uint8(c), int(c >> 8)
}

// fill makes the fast table.
func (t *fsstTable) fill() {
	if t.fast == nil {
		t.fast = make([]uint16, len(t.short))
	}
	for i, c := range t.short {
		switch {
		case c != 0:
			t.fast[i] = c
		case t.one[i&0xFF] != 0:
			t.fast[i] = t.one[i&0xFF]
		default:
			t.fast[i] = fsstEscaped
		}
	}
}

// compress writes the codes of data[from:to] at out[o:] (room for two
// bytes per byte, and one more) and returns where they end. A lookup
// reads the 8 bytes at p, past the value's end too (the page's next
// values): a symbol found that overruns the value is looked up again,
// exactly. The byte after a code is written whether escaped or not.
func (t *fsstTable) compress(out, data []byte, o, from, to int) int {
	p := from
	for p < to && p+8 <= cap(data) {
		w := binary.LittleEndian.Uint64(data[p : p+8])
		c := t.code(w)
		if int(c>>8&15) > to-p { // overruns the value: look it up exactly
			c = t.exact(w, to-p)
		}
		out[o], out[o+1] = uint8(c), uint8(w)
		o += 1 + int(c>>12)
		p += int(c >> 8 & 15)
	}
	for p < to {
		code, n := t.match(load(data, p), to-p)
		if n == 0 {
			out[o], out[o+1] = fsstEscape, data[p]
			o, p = o+2, p+1
			continue
		}
		out[o] = code
		o, p = o+1, p+n
	}
	return o
}

// fsstCompress compresses each value of data (offs, rows+1 page-relative
// offsets) with a symbol table built from a sample of them, returning the
// codes, their offsets and the table as Lance stores it; ok is false when
// that would not shrink the values.
func fsstCompress(offs []uint64, data []byte, h *fsstHistory) (cOffs []uint64, codes, table []byte, ok bool) {
	t := h.table(fsstSample(offs, data))
	defer fsstTables.Put(t)
	defer func() {
		if !ok && h != nil {
			h.syms = nil // the next page builds its own
		}
	}()
	t.fill()
	cOffs = make([]uint64, len(offs))
	rows := len(offs) - 1
	var widest int
	if len(data) < fsstSplitBytes {
		codes, widest, ok = t.compressRows(cOffs, offs, data, 0, rows, len(data))
	} else {
		// A large page is compressed in two halves at once (its column
		// is often the last one of a flush to be encoded), then joined.
		mid := rows / 2
		var second []byte
		var widest2 int
		var ok2 bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			second, widest2, ok2 = t.compressRows(cOffs, offs, data, mid, rows, len(data))
		}()
		codes, widest, ok = t.compressRows(cOffs, offs, data, 0, mid, len(data))
		<-done
		ok = ok && ok2 && len(codes)+len(second) < len(data)
		if ok {
			at := uint64(len(codes))
			for i := mid + 1; i <= rows; i++ {
				cOffs[i] += at
			}
			codes, widest = appendScratch(codes, second), max(widest, widest2)
		}
		putScratch(second)
	}
	// A value FSST made wider than a mini-block value may be (escapes
	// take two bytes) would push the page out of mini-blocks: plain then.
	if !ok || widest > maxMiniValue {
		return nil, nil, nil, false
	}
	return cOffs, codes, t.export(), true
}

// fsstHistory is the symbol table a column's last pages of one file were
// compressed with. Building a table costs as much as compressing a fifth
// of a page's values (a tenth of an append's CPU); a page like the one
// the table was built from reuses it: when the table saves, on the page's
// sample, at least fsstReuseFloor of what it saved on the sample it was
// built from, for up to fsstMaxReuses pages in a row. Values that compress
// worse than before get a table of their own at once. A table is only
// measured against its own sample, not against the table the page would
// build, so values that would compress better keep the old table until
// the next build (fsstMaxReuses pages at most); a table saving less than
// fsstMinReused of its sample, or one that failed to shrink a page, is not
// reused at all.
type fsstHistory struct {
	syms   []fsstSymbol // the table's symbols in code order; nil before a page
	saved  float64      // bytes saved per byte of the sample it was built from
	reuses int          // pages compressed with it since
}

const (
	fsstReuseFloor = 0.97
	fsstMaxReuses  = 3
	fsstMinReused  = 0.125
)

// table returns the symbol table to compress a page whose sample is
// sample: the last one if the page is like its own, else one built from
// sample (and kept in h). A nil h keeps nothing. Put it back in
// fsstTables when done with it.
func (h *fsstHistory) table(sample [][]byte) *fsstTable {
	size := 0
	for _, v := range sample {
		size += len(v)
	}
	if h != nil && h.syms != nil && h.reuses < fsstMaxReuses && h.saved >= fsstMinReused {
		t := fsstTables.Get().(*fsstTable)
		t.set(h.syms)
		if float64(t.saves(sample)) >= fsstReuseFloor*h.saved*float64(size) {
			h.reuses++
			return t
		}
		fsstTables.Put(t)
	}
	t, saved := buildFSST(sample)
	if h != nil && size > 0 {
		h.syms, h.saved, h.reuses = slices.Clone(t.syms), float64(saved)/float64(size), 0
	}
	return t
}

// saves returns the bytes the table saves on sample (escapes cost one).
func (t *fsstTable) saves(sample [][]byte) int {
	saved := 0
	for _, v := range sample {
		for p := 0; p < len(v); {
			if _, n := t.match(load(v, p), len(v)-p); n > 0 {
				saved, p = saved+n-1, p+n
			} else {
				saved, p = saved-1, p+1
			}
		}
	}
	return saved
}

// fsstSplitBytes is the page size from which compression runs in two
// halves at once.
const fsstSplitBytes = 1 << 20

// compressRows compresses values [from, to) of the page, writing their
// end offsets (relative to the first's start) to cOffs[from+1 : to+1],
// and returns the codes and the widest value's; ok is false once the codes
// reach limit bytes (the page's values: FSST would not shrink them).
//
// Each symbol's lookup depends on where the last one ended, a chain of
// loads one core runs one step at a time; so the two halves of the range
// are compressed in step, as two runs whose chains the core overlaps,
// then joined.
func (t *fsstTable) compressRows(cOffs, offs []uint64, data []byte, from, to, limit int) (codes []byte, widest int, ok bool) {
	mid := from + (to-from)/2
	a := fsstRun{row: from, end: mid, codes: scratchOf(int(offs[mid]-offs[from]) + 64)}
	b := fsstRun{row: mid, end: to, codes: scratchOf(int(offs[to]-offs[mid]) + 64)}
	defer func() { putScratch(b.codes) }() // joined to a's below; b.codes may grow
	a.begin(offs)
	b.begin(offs)
	for a.row < a.end && b.row < b.end {
		// In locals, not the runs' fields: the core keeps them in
		// registers, off the chains.
		ap, ato, ao, acodes := a.p, a.to, a.o, a.codes
		bp, bto, bo, bcodes := b.p, b.to, b.o, b.codes
		for ap < ato && bp < bto && ap+8 <= cap(data) && bp+8 <= cap(data) {
			wa := binary.LittleEndian.Uint64(data[ap : ap+8])
			wb := binary.LittleEndian.Uint64(data[bp : bp+8])
			ca, cb := t.code(wa), t.code(wb)
			if int(ca>>8&15) > ato-ap {
				ca = t.exact(wa, ato-ap)
			}
			if int(cb>>8&15) > bto-bp {
				cb = t.exact(wb, bto-bp)
			}
			acodes[ao], acodes[ao+1] = uint8(ca), uint8(wa)
			bcodes[bo], bcodes[bo+1] = uint8(cb), uint8(wb)
			ao, ap = ao+1+int(ca>>12), ap+int(ca>>8&15)
			bo, bp = bo+1+int(cb>>12), bp+int(cb>>8&15)
			// A value ends about every tenth step: the run goes on to
			// its next one here, without leaving the loop.
			if ap == ato && ao+bo < limit {
				ato = a.advance(ao, cOffs, offs)
			}
			if bp == bto && ao+bo < limit {
				bto = b.advance(bo, cOffs, offs)
			}
		}
		a.p, a.to, a.o, b.p, b.to, b.o = ap, ato, ao, bp, bto, bo
		// A run at the end of its value (or of the page's bytes) that
		// could not go on in the loop (its last value, one that needs
		// more room for its codes, an empty one) finishes it alone and
		// moves to its next one; the codes of both runs reaching limit
		// end it all.
		for _, r := range []*fsstRun{&a, &b} {
			if r.p >= r.to || r.p+8 > cap(data) {
				r.next(t, cOffs, offs, data)
				if a.o+b.o >= limit {
					return nil, 0, false
				}
			}
		}
	}
	for _, r := range []*fsstRun{&a, &b} {
		for r.row < r.end {
			r.next(t, cOffs, offs, data)
			if a.o+b.o >= limit {
				return nil, 0, false
			}
		}
	}
	for i := mid + 1; i <= to; i++ {
		cOffs[i] += uint64(a.o)
	}
	return appendScratch(a.codes[:a.o], b.codes[:b.o]), max(a.widest, b.widest), true
}

// fsstRun is values [row, end) of a page being compressed: row's bytes
// data[p:to] are left, its codes start at codes[start], end at codes[o].
type fsstRun struct {
	row, end int
	p, to    int
	o, start int
	codes    []byte
	widest   int
}

// advance ends value row at codes offset o and starts the next one,
// returning where its bytes end, when that needs nothing of next: there
// is a next value and its codes fit were every byte escaped. Otherwise it
// changes nothing and returns the current end.
func (r *fsstRun) advance(o int, cOffs, offs []uint64) int {
	row := r.row + 1
	if row >= r.end {
		return int(offs[r.row+1])
	}
	from, to := int(offs[row]), int(offs[row+1])
	if o+2*(to-from)+1 > len(r.codes) {
		return from
	}
	r.widest = max(r.widest, o-r.start)
	cOffs[row] = uint64(o)
	r.row, r.start = row, o
	return to
}

// begin starts value row (if any), making room for its codes were every
// byte escaped.
func (r *fsstRun) begin(offs []uint64) {
	if r.row >= r.end {
		return
	}
	r.p, r.to, r.start = int(offs[r.row]), int(offs[r.row+1]), r.o
	if need := r.o + 2*(r.to-r.p) + 1; need > len(r.codes) {
		bigger := scratchOf(2 * need)
		copy(bigger, r.codes[:r.o])
		putScratch(r.codes)
		r.codes = bigger
	}
}

// next compresses what is left of value row, records where its codes end
// and begins the next value.
func (r *fsstRun) next(t *fsstTable, cOffs, offs []uint64, data []byte) {
	r.o = t.compress(r.codes, data, r.o, r.p, r.to)
	r.widest = max(r.widest, r.o-r.start)
	cOffs[r.row+1] = uint64(r.o)
	r.row++
	r.begin(offs)
}

// code is the fast entry (length << 8 | code, escapes flagged as in
// fsstEscaped) of the longest symbol at the start of w, whatever the
// value's length: the 2-byte table, or the long symbol in its hash slot.
func (t *fsstTable) code(w uint64) uint16 {
	if s := &t.long[fsstHash(w)]; w&s.mask == s.val {
		return uint16(s.n)<<8 | uint16(s.code)
	}
	return t.fast[w&0xFFFF]
}

// exact is the fast entry of the longest symbol at the start of w that
// fits in the left bytes of its value (an escape when none does).
func (t *fsstTable) exact(w uint64, left int) uint16 {
	code, n := t.match(w, left)
	if n == 0 {
		return fsstEscaped
	}
	return uint16(n)<<8 | uint16(code)
}

// export is the table as Lance reads it: a header (symbol count, the
// "compressed" flag at bit 24, the magic), the symbols, their lengths.
func (t *fsstTable) export() []byte {
	out := make([]byte, fsstTableBytes)
	binary.LittleEndian.PutUint64(out, fsstMagic|1<<24|uint64(len(t.syms)))
	for i, s := range t.syms {
		binary.LittleEndian.PutUint64(out[8+8*i:], s.val)
		out[8+8*len(t.syms)+i] = s.n
	}
	return out
}

// fsstSample picks whole values, spread evenly over the page, until about
// 16 KiB: the same page always builds the same table.
func fsstSample(offs []uint64, data []byte) [][]byte {
	rows := len(offs) - 1
	if len(data) <= fsstSampleBytes {
		out := make([][]byte, 0, rows)
		for i := range rows {
			out = append(out, data[offs[i]:offs[i+1]])
		}
		return out
	}
	var out [][]byte
	// A stride coprime with rows visits every value before repeating.
	stride := max(1, rows/max(1, rows*fsstSampleBytes/len(data)))
	for gcd(stride, rows) != 1 {
		stride++
	}
	// One buffer (never grown) holds the values: each one's capacity
	// reaches past it, so lookups load 8 bytes at once.
	buf := make([]byte, 0, fsstSampleBytes+maxMiniValue+8)
	for i, size := 0, 0; size < fsstSampleBytes; i = (i + stride) % rows {
		start := len(buf)
		buf = append(buf, data[offs[i]:offs[i+1]]...)
		out = append(out, buf[start:])
		size += len(buf) - start + 1
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// fsstCounts are a table build's counters by code (0-255 a byte escaped,
// 256+ the table's symbols): of symbols, and of pairs with the entries in
// use listed, so that neither clearing nor ranking walks all 512x512.
type fsstCounts struct {
	one   [512]uint32
	two   [512 * 512]uint32
	pairs []int32 // entries of two in use, in the order first counted
	seen  symTable
}

// symTable numbers the distinct candidate symbols of a round: an open
// addressing table of symbols (a map cost more than the rest of a round,
// with the tens of thousands of pairs random text has).
type symTable struct {
	slots []symSlot
	mask  uint64
}

// symSlot is a symbol and its candidate number (n 0: a free slot).
type symSlot struct {
	val uint64
	n   uint8
	i   int32
}

// reset empties the table, sized for n symbols.
func (t *symTable) reset(n int) {
	size := 1 << 10
	for size < 2*n {
		size *= 2
	}
	if cap(t.slots) < size {
		t.slots = make([]symSlot, size)
	}
	t.slots = t.slots[:size]
	clear(t.slots)
	t.mask = uint64(size - 1)
}

// slot returns s's slot, or the free one where it goes.
func (t *symTable) slot(s fsstSymbol) *symSlot {
	for i := (s.val ^ uint64(s.n)<<56) * 0x9E3779B97F4A7C15 >> 32 & t.mask; ; i = (i + 1) & t.mask {
		if sl := &t.slots[i]; sl.n == 0 || sl.val == s.val && sl.n == s.n {
			return sl
		}
	}
}

func (c *fsstCounts) pair(i int) {
	if c.two[i] == 0 {
		c.pairs = append(c.pairs, int32(i))
	}
	c.two[i]++
}

func (c *fsstCounts) reset() {
	for _, i := range c.pairs {
		c.two[i] = 0
	}
	c.pairs = c.pairs[:0]
	clear(c.one[:])
}

// Tables and counters are a few hundred KiB: pages reuse them.
var (
	fsstTables = sync.Pool{New: func() any {
		t := &fsstTable{}
		for i := range t.long {
			t.long[i].val = 1
		}
		return t
	}}
	fsstCounters = sync.Pool{New: func() any { return new(fsstCounts) }}
)

// buildFSST builds a symbol table for sample in rounds: compress the
// sample with the table so far, counting how often each symbol and each
// pair of adjacent symbols occurs, then keep the 255 symbols (old ones and
// pairs joined) that save the most bytes. The table that compressed the
// sample best wins; saved is what it saves on the sample. Put it back in
// fsstTables when done with it.
func buildFSST(sample [][]byte) (t *fsstTable, saved int) {
	t = fsstTables.Get().(*fsstTable)
	t.set(nil)
	c := fsstCounters.Get().(*fsstCounts)
	defer fsstCounters.Put(c)
	var best []fsstSymbol
	bestGain := -1 << 62
	for _, frac := range []int{8, 38, 68, 98, 108, 128} {
		c.reset()
		gain := t.count(sample, c, frac < 128)
		if gain >= bestGain {
			best, bestGain = slices.Clone(t.syms), gain
		}
		t.set(t.candidates(c, frac))
	}
	t.set(best)
	return t, bestGain
}

// symbolOf is the symbol a counter code stands for.
func (t *fsstTable) symbolOf(code int) fsstSymbol {
	if code < 256 {
		return fsstSymbol{val: uint64(code), n: 1}
	}
	return t.syms[code-256]
}

// count compresses the sample, counting symbols (and, with pairs, adjacent
// symbols and a symbol followed by the next one's first byte), and returns
// the bytes saved.
func (t *fsstTable) count(sample [][]byte, c *fsstCounts, pairs bool) int {
	gain := 0
	next := func(v []byte, p int) (int, int) {
		code, n := t.match(load(v, p), len(v)-p)
		if n == 0 {
			gain--
			return int(v[p]), 1
		}
		gain += n - 1
		return 256 + int(code), n
	}
	for _, v := range sample {
		if len(v) == 0 {
			continue
		}
		prev, n := next(v, 0)
		for p := n; p < len(v); {
			c.one[prev]++
			cur, n := next(v, p)
			if cur >= 256 && n > 1 {
				c.one[v[p]]++
			}
			if pairs {
				c.pair(prev*512 + cur)
				if n > 1 {
					c.pair(prev*512 + int(v[p]))
				}
			}
			p += n
			prev = cur
		}
		c.one[prev]++
	}
	return gain
}

// candidates ranks the symbols and joined pairs of the counts by the bytes
// they would save (single bytes promoted: fewer escapes), best first.
func (t *fsstTable) candidates(c *fsstCounts, frac int) []fsstSymbol {
	codes := 256 + len(t.syms)
	// The gains of one symbol found twice (as itself and joined from a
	// pair) add up: c.seen numbers the candidates.
	c.seen.reset(codes + len(c.pairs))
	var syms []fsstSymbol
	var gains []uint64
	add := func(s fsstSymbol, count uint64) {
		if count < uint64(5*frac/128) {
			return
		}
		slot := c.seen.slot(s)
		if slot.n != 0 {
			gains[slot.i] += count * uint64(s.n)
			return
		}
		*slot = symSlot{val: s.val, n: s.n, i: int32(len(syms))}
		syms = append(syms, s)
		gains = append(gains, count*uint64(s.n))
	}
	for code, n := range c.one[:codes] {
		if n == 0 {
			continue
		}
		if s := t.symbolOf(code); s.n == 1 {
			add(s, 8*uint64(n))
		} else {
			add(s, uint64(n))
		}
	}
	for _, i := range c.pairs {
		s1, s2 := t.symbolOf(int(i/512)), t.symbolOf(int(i%512))
		if s1.n == 8 {
			continue
		}
		n := min(8, s1.n+s2.n)
		add(fsstSymbol{val: (s1.val | s2.val<<(8*s1.n)) & lowBytes(n), n: n}, uint64(c.two[i]))
	}
	// Best gain first, the first found first among equals: sorted as
	// gain<<32 | ^index, plain integers.
	rank := make([]uint64, len(syms))
	for i, g := range gains {
		rank[i] = min(g, 1<<31)<<32 | uint64(^uint32(i))
	}
	slices.Sort(rank)
	out := make([]fsstSymbol, 0, min(len(rank), fsstMaxSymbols+fsstMaxSymbols/4)) // room for hash-slot losers
	for _, r := range slices.Backward(rank) {
		if len(out) == cap(out) {
			break
		}
		out = append(out, syms[^uint32(r)])
	}
	return out
}

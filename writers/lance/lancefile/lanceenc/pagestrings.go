package lanceenc

import (
	"iter"

	"github.com/apache/arrow-go/v18/arrow"
)

// pageStrings are a page's variable-width values read where they lie, in
// their Arrow chunks' own buffers (a null is the empty value): deciding
// on a dictionary and building it need no copy of the bytes, which a
// page that becomes a dictionary never stores.
type pageStrings struct {
	rows   int   // the chunks' values, counted by add
	bytes  int   // the valid values' bytes
	widest int64 // the longest valid value
	chunks []strChunk
	starts []int // each chunk's first row
}

// strChunk is one chunk's values: offsets into raw (one of the three
// kinds), and the chunk itself when it has nulls.
type strChunk struct {
	o32   []int32
	o64   []int64
	u64   []uint64
	raw   []byte
	nulls arrow.Array
}

// pageStringsOf reads the values of vals, string or binary chunks.
func pageStringsOf(vals []arrow.Array) *pageStrings {
	p := &pageStrings{}
	for _, a := range vals {
		o32, o64 := valueOffsets(a)
		_, raw := BinaryChunk(a)
		c := strChunk{o32: o32, o64: o64, raw: raw}
		if a.NullN() > 0 {
			c.nulls = a
		}
		var n int
		var w int64
		if o32 != nil {
			n, w = measure(o32, c.nulls)
		} else {
			n, w = measure(o64, c.nulls)
		}
		p.add(c, n, w)
	}
	return p
}

// pageStringsOfBytes is the page of values data[offs[i]:offs[i+1]].
func pageStringsOfBytes(offs []uint64, data []byte) *pageStrings {
	p := &pageStrings{}
	n, w := measure(offs, nil)
	p.add(strChunk{u64: offs, raw: data}, n, w)
	return p
}

// add appends chunk c, whose valid values hold bytes, the longest widest.
func (p *pageStrings) add(c strChunk, bytes int, widest int64) {
	start := 0
	if k := len(p.starts); k > 0 {
		start = p.starts[k-1] + p.chunkRows(k-1)
	}
	p.chunks, p.starts = append(p.chunks, c), append(p.starts, start)
	p.rows = start + p.chunkRows(len(p.chunks)-1)
	p.bytes += bytes
	p.widest = max(p.widest, widest)
}

// chunkRows is the number of values of chunk k.
func (p *pageStrings) chunkRows(k int) int {
	c := p.chunks[k]
	switch {
	case c.o32 != nil:
		return len(c.o32) - 1
	case c.o64 != nil:
		return len(c.o64) - 1
	}
	return len(c.u64) - 1
}

// measure returns the bytes and the longest of the valid values of o
// (nulls: the chunk when it has nulls).
func measure[T int32 | int64 | uint64](o []T, nulls arrow.Array) (bytes int, widest int64) {
	if len(o) == 0 {
		return 0, 0
	}
	if nulls == nil {
		var w T
		for i := 1; i < len(o); i++ {
			w = max(w, o[i]-o[i-1])
		}
		return int(o[len(o)-1] - o[0]), int64(w)
	}
	for i := 1; i < len(o); i++ {
		if nulls.IsValid(i - 1) {
			l := int64(o[i] - o[i-1])
			bytes += int(l)
			widest = max(widest, l)
		}
	}
	return bytes, widest
}

// sampled yields every stride-th value of the page, n of them.
func (p *pageStrings) sampled(stride, n int) iter.Seq[[]byte] {
	return p.rowsAt(n, func(i int) int { return i * stride })
}

// rowsAt yields the values at rows row(0) <= row(1) <= ... <= row(n-1).
func (p *pageStrings) rowsAt(n int, row func(i int) int) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		k := 0
		for i := range n {
			j := row(i)
			for k+1 < len(p.starts) && p.starts[k+1] <= j {
				k++
			}
			if !yield(p.value(k, j-p.starts[k])) {
				return
			}
		}
	}
}

// value returns value i of chunk k.
func (p *pageStrings) value(k, i int) []byte {
	c := p.chunks[k]
	if c.nulls != nil && c.nulls.IsNull(i) {
		return nil
	}
	switch {
	case c.o32 != nil:
		return c.raw[c.o32[i]:c.o32[i+1]]
	case c.o64 != nil:
		return c.raw[c.o64[i]:c.o64[i+1]]
	}
	return c.raw[c.u64[i]:c.u64[i+1]]
}

// index puts the dictionary index of every value, 4 bytes each, in idx;
// false when t would take more than limit values.
func (p *pageStrings) index(t *dictTable, limit int, idx []byte) bool {
	for k, c := range p.chunks {
		out := idx[4*p.starts[k]:]
		var ok bool
		switch {
		case c.o32 != nil:
			ok = indexChunk(t, limit, c.o32, c.raw, c.nulls, out)
		case c.o64 != nil:
			ok = indexChunk(t, limit, c.o64, c.raw, c.nulls, out)
		default:
			ok = indexChunk(t, limit, c.u64, c.raw, c.nulls, out)
		}
		if !ok {
			return false
		}
	}
	return true
}

func indexChunk[T int32 | int64 | uint64](t *dictTable, limit int, o []T, raw []byte, nulls arrow.Array, idx []byte) bool {
	for i := 0; i+1 < len(o); i++ {
		var v []byte // a null: the empty value, whatever its offsets say
		if nulls == nil || nulls.IsValid(i) {
			v = raw[o[i]:o[i+1]]
		}
		k, ok := t.index(v, limit)
		if !ok {
			return false
		}
		idx[4*i], idx[4*i+1], idx[4*i+2], idx[4*i+3] = byte(k), byte(k>>8), byte(k>>16), byte(k>>24)
	}
	return true
}

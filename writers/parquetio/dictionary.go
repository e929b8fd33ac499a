package parquetio

import (
	"encoding/binary"
	"hash/maphash"
	"math"

	"github.com/parquet-go/parquet-go"
)

// Dictionary choice. Trying a dictionary on every column is what makes
// general-purpose encoders 2-4x slower than needed (as measured when this
// package was written), so a column is dictionary encoded only when a
// sample of its first values has few distinct ones. A dictionary that
// outgrows dictionaryMaxBytes falls back to PLAIN for the rest of its row
// group, which bounds the cost of a wrong guess.
const (
	dictionarySample   = 4096    // values sampled from the first piece
	dictionaryRatio    = 8       // at most sample/ratio distinct values
	dictionaryMaxBytes = 1 << 20 // per column chunk, PLAIN encoded
)

// wantsDictionary decides from the leaf's first piece of values.
// Dictionary input was already judged worth it by its producer; booleans
// are never worth it (PLAIN booleans are a bit each).
func (l *leaf) wantsDictionary() bool {
	if l.kind == parquet.Boolean {
		return false
	}
	if l.dictInput {
		return true
	}
	v := &l.vals
	sampled := min(v.n, dictionarySample)
	// Hashes stand in for values: a collision only makes the estimate
	// lower, and nothing is copied or allocated per value.
	distinct := make(map[uint64]struct{}, dictionarySample/dictionaryRatio+1)
	for i := range sampled {
		distinct[v.hash(l.kind, i)] = struct{}{}
		if len(distinct) > dictionarySample/dictionaryRatio {
			return false
		}
	}
	return sampled > 0 && len(distinct)*dictionaryRatio <= sampled
}

// sampleSeed seeds the hashes of byte arrays in wantsDictionary.
var sampleSeed = maphash.MakeSeed()

// hash identifies value i among values of kind: a fixed-width value's
// bits, a byte array's hash.
func (v *values) hash(kind parquet.Kind, i int) uint64 {
	switch kind {
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return maphash.Bytes(sampleSeed, v.bytesAt(i))
	case parquet.Int32:
		return uint64(uint32(v.i32[i]))
	case parquet.Int64:
		return uint64(v.i64[i])
	case parquet.Float:
		return uint64(math.Float32bits(v.f32[i]))
	case parquet.Double:
		return math.Float64bits(v.f64[i])
	}
	return 0
}

// dictionary maps a column chunk's distinct values to their indexes and
// keeps them PLAIN encoded for the dictionary page. Floats are keyed by
// their bits: -0 and +0, and NaNs of different payloads, stay distinct,
// as they must to read back the same bits.
type dictionary struct {
	kind  parquet.Kind
	words map[uint64]int32 // fixed-width values by their bits
	bytes map[string]int32 // byte arrays
	plain []byte
	n     int32
}

// add appends the index of each of v's values to idx, adding new values.
func (d *dictionary) add(v *values, idx []int32) []int32 {
	switch d.kind {
	case parquet.Int32:
		return addWords(d, idx, v.i32, func(x int32) uint64 { return uint64(uint32(x)) })
	case parquet.Int64:
		return addWords(d, idx, v.i64, func(x int64) uint64 { return uint64(x) })
	case parquet.Float:
		return addWords(d, idx, v.f32, func(x float32) uint64 { return uint64(math.Float32bits(x)) })
	case parquet.Double:
		return addWords(d, idx, v.f64, math.Float64bits)
	}
	if d.bytes == nil {
		d.bytes = make(map[string]int32)
	}
	var last []byte
	lastID := int32(-1)
	for i := range v.n {
		b := v.bytesAt(i)
		if lastID >= 0 && string(b) == string(last) {
			idx = append(idx, lastID)
			continue
		}
		id, ok := d.bytes[string(b)]
		if !ok {
			id = d.n
			d.n++
			d.bytes[string(b)] = id
			if d.kind == parquet.ByteArray {
				d.plain = binary.LittleEndian.AppendUint32(d.plain, uint32(len(b)))
			}
			d.plain = append(d.plain, b...)
		}
		idx = append(idx, id)
		last, lastID = b, id
	}
	return idx
}

// addWords adds fixed-width values keyed by bits; a run of one value is
// looked up once.
func addWords[T int32 | int64 | float32 | float64](d *dictionary, idx []int32, src []T, bits func(T) uint64) []int32 {
	if d.words == nil {
		d.words = make(map[uint64]int32)
	}
	var lastKey uint64
	lastID := int32(-1)
	for _, x := range src {
		k := bits(x)
		if lastID >= 0 && k == lastKey {
			idx = append(idx, lastID)
			continue
		}
		id, ok := d.words[k]
		if !ok {
			id = d.n
			d.n++
			d.words[k] = id
			d.plain = appendWord(d.plain, d.kind, k)
		}
		idx = append(idx, id)
		lastKey, lastID = k, id
	}
	return idx
}

// appendWord appends a fixed-width value, given by its bits, PLAIN encoded.
func appendWord(dst []byte, kind parquet.Kind, bits uint64) []byte {
	if kind == parquet.Int32 || kind == parquet.Float {
		return binary.LittleEndian.AppendUint32(dst, uint32(bits))
	}
	return binary.LittleEndian.AppendUint64(dst, bits)
}

// reset empties the dictionary for the next column chunk.
func (d *dictionary) reset() {
	clear(d.words)
	clear(d.bytes)
	d.plain = d.plain[:0]
	d.n = 0
}

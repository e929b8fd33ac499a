package parquetio

import (
	"math"

	"github.com/parquet-go/parquet-go"
)

// Dictionary choice. Trying a dictionary on every column is what makes
// general-purpose encoders 2-4x slower than needed (as measured when this
// package was written), so a
// column is dictionary encoded only when a sample of its first values has
// few distinct ones. parquet-go falls back to PLAIN for the rest of a row
// group if a dictionary outgrows dictionaryMaxBytes, which bounds the cost
// of a wrong guess.
const (
	dictionarySample   = 4096    // values sampled from the first chunk
	dictionaryRatio    = 8       // at most sample/ratio distinct values
	dictionaryMaxBytes = 1 << 20 // per column chunk
)

// wantsDictionary decides from the leaf's first chunk of values.
// Dictionary input was already judged worth it by its producer.
func (l *leaf) wantsDictionary() bool {
	if l.dictInput {
		return true
	}
	if l.kind == parquet.Boolean {
		return false // RLE/bit-packed booleans are already tiny
	}
	sampled := 0
	distinct := make(map[string]struct{})
	for _, v := range l.vals {
		if v.IsNull() {
			continue
		}
		if sampled++; sampled > dictionarySample {
			break
		}
		distinct[string(keyOf(v))] = struct{}{}
		if len(distinct) > dictionarySample/dictionaryRatio {
			return false
		}
	}
	return sampled > 0 && len(distinct)*dictionaryRatio <= sampled
}

// keyOf returns bytes that identify v among values of one column.
func keyOf(v parquet.Value) []byte {
	switch v.Kind() {
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return v.ByteArray()
	case parquet.Float:
		return u64Key(uint64(math.Float32bits(v.Float())))
	case parquet.Double:
		return u64Key(math.Float64bits(v.Double()))
	}
	return u64Key(uint64(v.Int64()))
}

func u64Key(x uint64) []byte {
	var b [8]byte
	for i := range b {
		b[i] = byte(x >> (8 * i))
	}
	return b[:]
}

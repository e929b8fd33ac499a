// Package rowdigest computes an order-independent digest of Arrow rows:
// the sum, modulo 2^64, of one 64-bit hash per row. Digests of batches add
// up, so the digest of a set of rows does not depend on how they were
// split into batches and streams nor on their order: a replay that sends
// the same rows differently partitioned digests the same. The transaction
// coordinator compares a replayed epoch's digest with the one its commit
// published (txn.replay_check).
//
// It is not a cryptographic hash: it detects other data (two pipelines
// sharing a writer name, a replay that is not deterministic), not an
// adversary. A row's hash covers its values column by column, in column
// order, nulls included; not the schema's names or types.
//
// It imports only arrow-go and xxhash.
package rowdigest

import (
	"encoding/binary"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cespare/xxhash/v2"
)

// Of returns the digest of rec's rows. The digest of no rows is 0.
func Of(rec arrow.RecordBatch) uint64 {
	n := int(rec.NumRows())
	if n == 0 {
		return 0
	}
	rows := make([]uint64, n)
	col := make([]uint64, n)
	for _, c := range rec.Columns() {
		hashArray(c, col)
		for i, h := range col {
			rows[i] = rows[i]*prime + h
		}
	}
	var sum uint64
	for _, h := range rows {
		sum += mix(h)
	}
	return sum
}

const (
	prime = 0x9e3779b97f4a7c15
	// Hashes of nulls and of the start of a list's elements, apart from
	// any value's.
	nullHash  = 0x6a09e667f3bcc908
	listStart = 0xbb67ae8584caa73b
)

// mix is MurmurHash3's 64-bit finalizer: every input bit flips about half
// of the output bits.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb93e53ca6b2b
	h ^= h >> 33
	return h
}

// hashArray writes the hash of each slot of a to out (len(out) = a.Len()).
func hashArray(a arrow.Array, out []uint64) {
	hashValues(a, out)
	if a.NullN() > 0 {
		for i := range out {
			if a.IsNull(i) {
				out[i] = nullHash
			}
		}
	}
}

// hashValues writes the hash of each slot's value to out; null slots are
// overwritten by hashArray.
func hashValues(a arrow.Array, out []uint64) {
	switch a := a.(type) {
	case *array.Null:
		// every slot is null
	case *array.Boolean:
		for i := range out {
			if a.Value(i) {
				out[i] = mix(1)
			} else {
				out[i] = mix(2)
			}
		}
	case *array.String:
		hashStrings(a, out)
	case *array.LargeString:
		hashStrings(a, out)
	case *array.StringView:
		hashStrings(a, out)
	case *array.Binary:
		hashBytes(a, out)
	case *array.LargeBinary:
		hashBytes(a, out)
	case *array.BinaryView:
		hashBytes(a, out)
	case *array.Dictionary:
		hashDictionary(a, out)
	case *array.Struct:
		hashStruct(a, out)
	case array.ListLike:
		hashList(a, out)
	case array.ExtensionArray:
		hashArray(a.Storage(), out)
	default:
		if !hashFixedWidth(a, out) {
			// Unions and run-end encoded arrays: rare in ingest, hashed
			// through their text form.
			for i := range out {
				out[i] = xxhash.Sum64String(a.ValueStr(i))
			}
		}
	}
}

func hashStrings[A interface{ Value(int) string }](a A, out []uint64) {
	for i := range out {
		out[i] = xxhash.Sum64String(a.Value(i))
	}
}

func hashBytes[A interface{ Value(int) []byte }](a A, out []uint64) {
	for i := range out {
		out[i] = xxhash.Sum64(a.Value(i))
	}
}

// hashFixedWidth hashes the values of a fixed-width type whose values are
// whole bytes in buffer 1 (integers, floats, temporal types, decimals,
// intervals, fixed-size binary) and reports whether a is one.
func hashFixedWidth(a arrow.Array, out []uint64) bool {
	fw, ok := a.DataType().(arrow.FixedWidthDataType)
	if !ok || fw.BitWidth()%8 != 0 || fw.BitWidth() == 0 {
		return false
	}
	d := a.Data()
	if len(d.Buffers()) < 2 || d.Buffers()[1] == nil {
		return false
	}
	w := fw.BitWidth() / 8
	vals := d.Buffers()[1].Bytes()[d.Offset()*w:]
	switch w {
	case 1:
		for i := range out {
			out[i] = mix(uint64(vals[i]) ^ 1<<56)
		}
	case 2:
		for i := range out {
			out[i] = mix(uint64(binary.LittleEndian.Uint16(vals[2*i:])) ^ 2<<56)
		}
	case 4:
		for i := range out {
			out[i] = mix(uint64(binary.LittleEndian.Uint32(vals[4*i:])) ^ 4<<56)
		}
	case 8:
		for i := range out {
			out[i] = mix(binary.LittleEndian.Uint64(vals[8*i:]) ^ math.MaxUint64)
		}
	default:
		for i := range out {
			out[i] = xxhash.Sum64(vals[w*i : w*(i+1)])
		}
	}
	return true
}

// hashDictionary hashes each distinct value once: a dictionary-encoded
// column digests like its decoded values.
func hashDictionary(a *array.Dictionary, out []uint64) {
	dict := a.Dictionary()
	values := make([]uint64, dict.Len())
	hashArray(dict, values)
	for i := range out {
		if a.IsValid(i) {
			out[i] = values[a.GetValueIndex(i)]
		}
	}
}

func hashStruct(a *array.Struct, out []uint64) {
	clear(out)
	field := make([]uint64, len(out))
	for f := range a.NumField() {
		hashArray(a.Field(f), field)
		for i, h := range field {
			out[i] = out[i]*prime + h
		}
	}
}

// hashList folds each slot's elements, in order, after its length.
func hashList(a array.ListLike, out []uint64) {
	values := a.ListValues()
	elems := make([]uint64, values.Len())
	hashArray(values, elems)
	for i := range out {
		if a.IsNull(i) {
			continue
		}
		start, end := a.ValueOffsets(i)
		h := uint64(listStart) + uint64(end-start)
		for _, e := range elems[start:end] {
			h = h*prime + e
		}
		out[i] = mix(h)
	}
}

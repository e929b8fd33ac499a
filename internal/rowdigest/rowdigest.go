// Package rowdigest computes an order-independent digest of Arrow rows:
// the sum, modulo 2^64, of one 64-bit hash per row. Digests of batches add
// up, so the digest of a set of rows does not depend on how they were
// split into batches and streams nor on their order: a replay that sends
// the same rows differently partitioned digests the same. The transaction
// coordinator compares a replayed epoch's digest with the one its commit
// published (txn.replay_check).
//
// A row's hash covers its values by column name, as the table sinks match
// columns: the columns' order does not matter, and a null value counts as
// an absent column (a stream may leave a nullable column out). Values are
// hashed as what they mean rather than how they were encoded, where
// clients commonly differ: integers by value whatever their width,
// floats as float64, timestamps as nanoseconds whatever their unit,
// strings whether large, view or dictionary-encoded. It is not a
// cryptographic hash: it detects other data (two pipelines sharing a
// writer name, a replay that is not deterministic), not an adversary.
//
// It imports only arrow-go and xxhash.
package rowdigest

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
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
	for i, c := range rec.Columns() {
		hashArray(c, col)
		addNamed(rows, col, rec.ColumnName(i))
	}
	var sum uint64
	for _, h := range rows {
		sum += mix(h)
	}
	return sum
}

// addNamed adds the hashes of a named column's values to acc, skipping
// nulls (0): a sum, so that the order of columns does not matter.
func addNamed(acc, vals []uint64, name string) {
	seed := xxhash.Sum64String(name)
	for i, h := range vals {
		if h != 0 {
			acc[i] += mix(h ^ seed)
		}
	}
}

// Tags set apart values of different kinds that share their bits.
const (
	prime     = 0x9e3779b97f4a7c15
	tagInt    = 0x6a09e667f3bcc908
	tagUint   = 0xbb67ae8584caa73b
	tagFloat  = 0x3c6ef372fe94f82b
	tagTime   = 0xa54ff53a5f1d36f1
	tagBool   = 0x510e527fade682d1
	listStart = 0x9b05688c2b3e6c1f
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

// valid makes a value's hash non-zero: 0 stands for null.
func valid(h uint64) uint64 { return h | 1 }

// hashArray writes the hash of each slot of a to out (len(out) = a.Len()):
// 0 for a null, never 0 for a value.
func hashArray(a arrow.Array, out []uint64) {
	hashValues(a, out)
	bits := a.NullBitmapBytes()
	if a.NullN() == 0 || bits == nil {
		return // a null-typed array has no bitmap: hashValues cleared it
	}
	off := a.Data().Offset()
	for i := range out {
		if !bitutil.BitIsSet(bits, off+i) {
			out[i] = 0
		}
	}
}

// hashValues writes the hash of each slot's value to out; null slots are
// overwritten by hashArray.
func hashValues(a arrow.Array, out []uint64) {
	switch a := a.(type) {
	case *array.Null:
		clear(out)
	case *array.Boolean:
		for i := range out {
			if a.Value(i) {
				out[i] = valid(mix(tagBool + 1))
			} else {
				out[i] = valid(mix(tagBool))
			}
		}
	case *array.Int8:
		hashInts(a.Int8Values(), out)
	case *array.Int16:
		hashInts(a.Int16Values(), out)
	case *array.Int32:
		hashInts(a.Int32Values(), out)
	case *array.Int64:
		hashInts(a.Int64Values(), out)
	case *array.Uint8:
		hashUints(a.Uint8Values(), out)
	case *array.Uint16:
		hashUints(a.Uint16Values(), out)
	case *array.Uint32:
		hashUints(a.Uint32Values(), out)
	case *array.Uint64:
		hashUints(a.Uint64Values(), out)
	case *array.Float32:
		hashFloats(a.Float32Values(), out)
	case *array.Float64:
		hashFloats(a.Float64Values(), out)
	case *array.Timestamp:
		hashTimestamps(a, out)
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
				out[i] = valid(xxhash.Sum64String(a.ValueStr(i)))
			}
		}
	}
}

func hashInts[T int8 | int16 | int32 | int64](vals []T, out []uint64) {
	for i, v := range vals {
		out[i] = valid(mix(uint64(int64(v)) ^ tagInt))
	}
}

func hashUints[T uint8 | uint16 | uint32 | uint64](vals []T, out []uint64) {
	for i, v := range vals {
		out[i] = valid(mix(uint64(v) ^ tagUint))
	}
}

func hashFloats[T float32 | float64](vals []T, out []uint64) {
	for i, v := range vals {
		out[i] = valid(mix(math.Float64bits(float64(v)) ^ tagFloat))
	}
}

// hashTimestamps hashes instants as nanoseconds since the epoch, so that
// one instant hashes the same in every unit (the time zone is metadata).
func hashTimestamps(a *array.Timestamp, out []uint64) {
	scale := int64(1)
	switch a.DataType().(*arrow.TimestampType).Unit {
	case arrow.Second:
		scale = 1e9
	case arrow.Millisecond:
		scale = 1e6
	case arrow.Microsecond:
		scale = 1e3
	}
	for i, v := range a.TimestampValues() {
		out[i] = valid(mix(uint64(int64(v)*scale) ^ tagTime))
	}
}

func hashStrings[A interface{ Value(int) string }](a A, out []uint64) {
	for i := range out {
		out[i] = valid(xxhash.Sum64String(a.Value(i)))
	}
}

func hashBytes[A interface{ Value(int) []byte }](a A, out []uint64) {
	for i := range out {
		out[i] = valid(xxhash.Sum64(a.Value(i)))
	}
}

// hashFixedWidth hashes the bytes of the other fixed-width types whose
// values are whole bytes in buffer 1 (dates, times, durations, decimals,
// intervals, fixed-size binary, float16) and reports whether a is one.
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
	for i := range out {
		out[i] = valid(xxhash.Sum64(vals[w*i : w*(i+1)]))
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

// hashStruct combines the fields by name, as Of combines columns.
func hashStruct(a *array.Struct, out []uint64) {
	clear(out)
	field := make([]uint64, len(out))
	st := a.DataType().(*arrow.StructType)
	for f := range a.NumField() {
		hashArray(a.Field(f), field)
		addNamed(out, field, st.Field(f).Name)
	}
	for i, h := range out {
		out[i] = valid(mix(h))
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
		out[i] = valid(mix(h))
	}
}

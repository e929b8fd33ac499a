package dv

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"strings"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/google/uuid"

	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// Deletion-vector storage, as checked byte by byte on the Spark-written
// reference tables of testdata/delta-golden (dv-small, dv-same-file,
// dv-partitioned-checkpoint, dv-large):
//
//	file    = version:u8(=1) entry*
//	entry   = size:u32be bitmap crc:u32be     (descriptor offset → size)
//	bitmap  = magic:u32le(=1681511377) buckets:u64le (key:u32le roaring32)*
//	crc     = CRC-32/IEEE of bitmap, magic included
//
// size == descriptor sizeInBytes == len(bitmap). roaring32 is the portable
// RoaringFormatSpec serialization; Spark writes array/bitmap containers
// (cookie 12346) and a single bucket with key 0 for files under 2^32 rows.
// An inline ("i") descriptor holds the bitmap alone, Z85-encoded after
// zero padding to a multiple of 4 bytes; it has no size field or CRC.
const (
	dvFormatVersion = 1
	dvMagic         = 1681511377
	// dvMinBitmap is the magic and the bucket count of an empty bitmap.
	dvMinBitmap = 4 + 8
	// dvUUIDChars is the length of a Z85-encoded UUID, the tail of a
	// relative ("u") descriptor's pathOrInlineDv.
	dvUUIDChars = 20
	// dvCombinedRead: an entry starting this close to the file start is
	// read together with the version byte in one ranged request.
	dvCombinedRead = 64 << 10
)

// Deletion-vector storage types (DeletionVector.StorageType).
const (
	Relative = "u"
	Inline   = "i"
	Absolute = "p"
)

// ReadDeletionVector returns the row positions d marks deleted: 0-based
// physical row indexes in the data file, ascending, without duplicates. A
// nil d gives nil, nil.
//
// storageType "u" is read from <prefix>/deletion_vector_<uuid>.bin under the
// table root through store (one ranged read for the first entries of a
// file), "i" is decoded from the descriptor itself, and "p" (an absolute
// path) is refused with an error wrapping ErrUnsupported. The version byte,
// the size field (must equal SizeInBytes), the magic, the CRC-32 and the
// decoded cardinality (must equal Cardinality) are all checked; a mismatch
// gives an error naming the file and wrapping ErrCorrupt. A vector of more
// than 2^28 rows is refused (ErrUnsupported) before it is materialised. Storage failures
// wrap storage.ErrNotExist or writers.ErrUnavailable. ctx bounds the read.
// Safe for concurrent use.
func ReadDeletionVector(ctx context.Context, store deltalog.Store, d *deltalog.DeletionVector) ([]int64, error) {
	if d == nil {
		return nil, nil
	}
	var (
		name   string
		bitmap []byte
		err    error
	)
	switch d.StorageType {
	case Relative:
		if name, err = relativeKey(d.PathOrInlineDv); err != nil {
			return nil, err
		}
		bitmap, err = readStoredBitmap(ctx, store, name, d)
	case Inline:
		name = "inline " + d.PathOrInlineDv
		bitmap, err = inlineBitmap(d)
	case Absolute:
		return nil, fmt.Errorf("delta: deletion vector %q: absolute paths (storageType p) cannot be read through the table store: %w",
			d.PathOrInlineDv, deltalog.ErrUnsupported)
	default:
		return nil, fmt.Errorf("delta: deletion vector %q: unknown storageType %q: %w", d.PathOrInlineDv, d.StorageType, deltalog.ErrCorrupt)
	}
	if err != nil {
		return nil, err
	}
	bm, err := decodeBitmap(bitmap)
	if err != nil {
		return nil, fmt.Errorf("delta: deletion vector %s: %w: %w", name, deltalog.ErrCorrupt, err)
	}
	rows, err := deletedRows(bm, d.Cardinality)
	if err != nil {
		return nil, fmt.Errorf("delta: deletion vector %s: %w", name, err)
	}
	return rows, nil
}

// maxDeletionVectorRows bounds the rows one deletion vector may delete,
// as Quiver materialises them (8 bytes each): run containers describe 2^16
// rows in 4 bytes, so the bitmap's size does not bound its cardinality.
const maxDeletionVectorRows = 1 << 28

// deletedRows materialises bm once its cardinality matches the log's and
// fits maxDeletionVectorRows, so neither the log nor the bitmap alone
// sizes the allocation.
func deletedRows(bm *roaring64.Bitmap, cardinality int64) ([]int64, error) {
	got := bm.GetCardinality()
	if got != uint64(cardinality) {
		return nil, fmt.Errorf("%d rows in the bitmap, the log says cardinality %d: %w", got, cardinality, deltalog.ErrCorrupt)
	}
	if got > maxDeletionVectorRows {
		return nil, fmt.Errorf("%d deleted rows, over Quiver's limit of %d per data file: %w", got, maxDeletionVectorRows, deltalog.ErrUnsupported)
	}
	if !bm.IsEmpty() && bm.Maximum() > math.MaxInt64 {
		return nil, fmt.Errorf("row %d does not fit int64: %w", bm.Maximum(), deltalog.ErrCorrupt)
	}
	rows := make([]int64, 0, got)
	for it := bm.Iterator(); it.HasNext(); {
		rows = append(rows, int64(it.Next()))
	}
	return rows, nil
}

// DeletionVectorKey returns the storage key, relative to the table root, of
// the file holding a storageType "u" deletion vector; ok is false for a nil,
// inline or absolute one. A malformed "u" descriptor or an unknown storage
// type is an error wrapping ErrCorrupt.
func DeletionVectorKey(d *deltalog.DeletionVector) (key string, ok bool, err error) {
	if d == nil {
		return "", false, nil
	}
	switch d.StorageType {
	case Relative:
		key, err := relativeKey(d.PathOrInlineDv)
		return key, err == nil, err
	case Inline, Absolute:
		return "", false, nil
	}
	return "", false, fmt.Errorf("delta: deletion vector %q: unknown storageType %q: %w", d.PathOrInlineDv, d.StorageType, deltalog.ErrCorrupt)
}

// relativeKey maps "<prefix><20-char Z85 UUID>" to
// "<prefix>/deletion_vector_<uuid>.bin" (no "/" without a prefix).
func relativeKey(p string) (string, error) {
	if len(p) < dvUUIDChars {
		return "", fmt.Errorf("delta: deletion vector %q: a relative path needs a %d-character Z85 UUID: %w", p, dvUUIDChars, deltalog.ErrCorrupt)
	}
	prefix := p[:len(p)-dvUUIDChars]
	raw, err := z85Decode(p[len(p)-dvUUIDChars:])
	if err != nil {
		return "", fmt.Errorf("delta: deletion vector %q: %w: %w", p, deltalog.ErrCorrupt, err)
	}
	// Spark's prefixes are short random alphanumerics; anything that could
	// step out of the table root is refused.
	if strings.ContainsAny(prefix, `/\`) || prefix == "." || prefix == ".." {
		return "", fmt.Errorf("delta: deletion vector %q: invalid random prefix %q: %w", p, prefix, deltalog.ErrCorrupt)
	}
	name := "deletion_vector_" + uuid.UUID(raw).String() + ".bin"
	if prefix == "" {
		return name, nil
	}
	return prefix + "/" + name, nil
}

// readStoredBitmap reads the entry of d in the file key and returns its
// bitmap bytes (magic included) once version, size and CRC check out.
func readStoredBitmap(ctx context.Context, store deltalog.Store, key string, d *deltalog.DeletionVector) ([]byte, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("delta: deletion vector %s: %s: %w", key, fmt.Sprintf(format, args...), deltalog.ErrCorrupt)
	}
	off := int64(1) // absent offset: the only entry, right after the version byte
	if d.Offset != nil {
		off = int64(*d.Offset)
	}
	if off < 1 || d.SizeInBytes < dvMinBitmap {
		return nil, corrupt("offset %d, sizeInBytes %d: want offset >= 1 and size >= %d", off, d.SizeInBytes, dvMinBitmap)
	}
	r, fileSize, err := store.OpenReader(ctx, key)
	if err != nil {
		return nil, deltalog.StorageError("read deletion vector", key, err)
	}
	defer r.Close()
	end := off + 4 + int64(d.SizeInBytes) + 4
	if end > fileSize {
		return nil, corrupt("entry at offset %d with %d bitmap bytes runs past the end of the %d-byte file", off, d.SizeInBytes, fileSize)
	}
	start := off
	if off <= dvCombinedRead {
		start = 0
	}
	buf := make([]byte, end-start)
	if err := readFull(r, buf, start); err != nil {
		return nil, deltalog.StorageError("read deletion vector", key, err)
	}
	version := buf[0]
	if start != 0 {
		v := make([]byte, 1)
		if err := readFull(r, v, 0); err != nil {
			return nil, deltalog.StorageError("read deletion vector", key, err)
		}
		version = v[0]
	}
	if version != dvFormatVersion {
		return nil, corrupt("format version %d, want %d", version, dvFormatVersion)
	}
	entry := buf[off-start:]
	if size := binary.BigEndian.Uint32(entry); size != uint32(d.SizeInBytes) {
		return nil, corrupt("size field %d at offset %d, the log says sizeInBytes %d", size, off, d.SizeInBytes)
	}
	bitmap := entry[4 : 4+d.SizeInBytes]
	if want, got := binary.BigEndian.Uint32(entry[4+d.SizeInBytes:]), crc32.ChecksumIEEE(bitmap); got != want {
		return nil, corrupt("CRC-32 %08x of the bitmap at offset %d, the file says %08x", got, off, want)
	}
	return bitmap, nil
}

// readFull fills buf from r at off; io.EOF with a full buffer is success
// (io.ReaderAt allows it at the end of the file).
func readFull(r io.ReaderAt, buf []byte, off int64) error {
	n, err := r.ReadAt(buf, off)
	if n == len(buf) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// inlineBitmap decodes an inline descriptor, dropping the Z85 zero padding.
func inlineBitmap(d *deltalog.DeletionVector) ([]byte, error) {
	data, err := z85Decode(d.PathOrInlineDv)
	if err != nil {
		return nil, fmt.Errorf("delta: deletion vector inline %s: %w: %w", d.PathOrInlineDv, deltalog.ErrCorrupt, err)
	}
	if n := int(d.SizeInBytes); n < 0 || n > len(data) || len(data)-n >= 4 {
		return nil, fmt.Errorf("delta: deletion vector inline %s: sizeInBytes %d does not match %d decoded bytes: %w",
			d.PathOrInlineDv, d.SizeInBytes, len(data), deltalog.ErrCorrupt)
	}
	return data[:d.SizeInBytes], nil
}

// decodeBitmap parses magic + portable roaring64 bitmap; every byte must
// belong to the bitmap.
func decodeBitmap(b []byte) (*roaring64.Bitmap, error) {
	if len(b) < dvMinBitmap {
		return nil, fmt.Errorf("bitmap of %d bytes is shorter than its %d-byte header", len(b), dvMinBitmap)
	}
	if magic := binary.LittleEndian.Uint32(b); magic != dvMagic {
		return nil, fmt.Errorf("magic number %d, want %d (portable RoaringBitmapArray)", magic, dvMagic)
	}
	body := b[4:]
	// A bucket takes at least a 4-byte key and an 8-byte roaring header:
	// bound the count before the library allocates for it.
	if buckets := binary.LittleEndian.Uint64(body); buckets > uint64(len(body)-8)/12 {
		return nil, fmt.Errorf("%d buckets cannot fit in %d bytes", buckets, len(body))
	}
	bm := roaring64.New()
	n, err := bm.ReadFrom(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("roaring bitmap: %w", err)
	}
	if n != int64(len(body)) {
		return nil, fmt.Errorf("%d bytes after the roaring bitmap", int64(len(body))-n)
	}
	if err := bm.Validate(); err != nil {
		return nil, fmt.Errorf("roaring bitmap: %w", err)
	}
	return bm, nil
}

// MergeRows merges two ascending row-position lists (say an existing
// deletion vector and newly matched rows) into a new ascending list without
// duplicates. The inputs are not modified.
func MergeRows(a, b []int64) []int64 {
	out := make([]int64, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		var v int64
		if len(b) == 0 || (len(a) > 0 && a[0] <= b[0]) {
			v, a = a[0], a[1:]
		} else {
			v, b = b[0], b[1:]
		}
		if len(out) == 0 || v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}

package dv

import (
	"encoding/binary"
	"hash/crc32"
	"math"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/google/uuid"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// DeletionVectorFile collects the deletion vectors written by one commit
// into one file, deletion_vector_<uuid>.bin at the table root, named by a
// random (v4) UUID as Spark does. Build it with NewDeletionVectorFile, Add
// one bitmap per data file, Put Bytes at Key, then commit the descriptors
// Add returned. It is not safe for concurrent use.
type DeletionVectorFile struct {
	id      uuid.UUID
	encoded string // Z85 of id: the descriptors' pathOrInlineDv
	data    []byte // version byte, then one entry per Add
	n       int
}

// NewDeletionVectorFile starts an empty file with a fresh random name.
func NewDeletionVectorFile() *DeletionVectorFile {
	id := uuid.New()
	encoded, _ := z85Encode(id[:]) // 16 bytes: a multiple of 4, cannot fail
	return &DeletionVectorFile{id: id, encoded: encoded, data: []byte{dvFormatVersion}}
}

// Add appends the bitmap of rows (0-based physical row positions in one data
// file: ascending, unique, >= 0) and returns its descriptor: storageType
// "u", pathOrInlineDv the 20-character Z85 of the file's UUID (no prefix),
// Offset the position of the entry's size field, SizeInBytes the bitmap
// length with its magic, Cardinality len(rows), MaxRowIndex nil. Bitmaps use
// the portable roaring64 layout without run containers, which every Delta
// reader decodes. Empty or unordered rows, or a file that would outgrow the
// int32 offsets of the protocol (2 GiB), give an error wrapping
// writers.ErrInvalid and leave the file unchanged.
func (f *DeletionVectorFile) Add(rows []int64) (*deltalog.DeletionVector, error) {
	if len(rows) == 0 {
		return nil, writers.Errorf(writers.ErrInvalid, "delta: deletion vector %s: no rows; a data file without deleted rows needs no deletion vector", f.Key())
	}
	bm := roaring64.New()
	prev := int64(-1)
	for i, r := range rows {
		if r <= prev {
			return nil, writers.Errorf(writers.ErrInvalid, "delta: deletion vector %s: row %d at index %d: rows must be ascending, unique and >= 0", f.Key(), r, i)
		}
		prev = r
		bm.Add(uint64(r))
	}
	size := 4 + bm.GetSerializedSizeInBytes()
	offset := len(f.data)
	if uint64(offset)+4+size+4 > math.MaxInt32 {
		return nil, writers.Errorf(writers.ErrInvalid, "delta: deletion vector %s: %d more bitmap bytes would pass the 2 GiB limit of a deletion-vector file; start a new file", f.Key(), size)
	}
	bitmap, err := encodeBitmap(bm)
	if err != nil {
		return nil, err
	}
	f.data = binary.BigEndian.AppendUint32(f.data, uint32(len(bitmap)))
	f.data = append(f.data, bitmap...)
	f.data = binary.BigEndian.AppendUint32(f.data, crc32.ChecksumIEEE(bitmap))
	f.n++
	off := int32(offset)
	return &deltalog.DeletionVector{
		StorageType:    Relative,
		PathOrInlineDv: f.encoded,
		Offset:         &off,
		SizeInBytes:    int32(len(bitmap)),
		Cardinality:    int64(len(rows)),
	}, nil
}

// Key is the storage key of the file, relative to the table root.
func (f *DeletionVectorFile) Key() string {
	return "deletion_vector_" + f.id.String() + ".bin"
}

// Bytes is the whole file: the version byte and every entry added so far.
// The slice is shared with f: do not modify it, and call Bytes again after
// Add.
func (f *DeletionVectorFile) Bytes() []byte { return f.data }

// Len is the number of deletion vectors added.
func (f *DeletionVectorFile) Len() int { return f.n }

// encodeBitmap returns the magic followed by bm in the portable roaring64
// serialization.
func encodeBitmap(bm *roaring64.Bitmap) ([]byte, error) {
	body, err := bm.ToBytes()
	if err != nil {
		return nil, writers.Errorf(writers.ErrInvalid, "delta: deletion vector: serialize bitmap: %w", err)
	}
	return append(binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(body)), dvMagic), body...), nil
}

package lanceformat

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// FuzzDecodeManifestFile: hostile manifest files fail cleanly, and every
// decodable manifest re-encodes to a file that decodes to the same
// version and fragments.
func FuzzDecodeManifestFile(f *testing.F) {
	ls, _ := FromArrow(allTypesSchema())
	last := uint64(3)
	m := &Manifest{Schema: *ls, Version: 4, MaxFragmentID: &last, Fragments: []Fragment{{ID: 3, PhysicalRows: 9,
		Files:    []DataFile{{Path: "a.lance", Fields: []int32{0, 1}, ColumnIndices: []int32{0, 1}, Major: 2}},
		Deletion: &DeletionFile{ReadVersion: 2, ID: 7, NumDeletedRows: 1}}}}
	f.Add(encodeManifestFile(m, []byte{8, 1}, []byte{10, 0}))
	f.Add([]byte("LANC"))
	f.Fuzz(func(t *testing.T, b []byte) {
		mf, err := decodeManifestFile(b)
		if err != nil {
			return
		}
		again, err := decodeManifestFile(encodeManifestFile(mf.m, mf.txn, mf.index))
		if err != nil {
			t.Fatalf("re-encoded manifest does not decode: %v", err)
		}
		if again.m.Version != mf.m.Version || len(again.m.Fragments) != len(mf.m.Fragments) {
			t.Fatalf("round trip changed the manifest")
		}
		_, _ = DecodeTransaction(mf.txn)
	})
}

// FuzzOpenDataFile: hostile data files fail cleanly (no panic, no
// unbounded allocation) and leak no Arrow memory.
func FuzzOpenDataFile(f *testing.F) {
	mem := memory.NewGoAllocator()
	s := allTypesSchema()
	rec := randomRecord(mem, s, newRand(3), 0, 20, 20)
	f.Add(writeFile(f, s, 512, rec))
	rec.Release()
	f.Fuzz(func(t *testing.T, b []byte) {
		cm := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer cm.AssertSize(t, 0)
		fr, err := OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		if r, err := fr.Read(cm); err == nil {
			r.Release()
		}
	})
}

// FuzzDeletionBitmap: hostile roaring bitmaps fail cleanly; encoded ones
// decode to the same offsets.
func FuzzDeletionBitmap(f *testing.F) {
	f.Add(EncodeDeletionBitmap([]uint32{1, 5, 70000}))
	f.Fuzz(func(t *testing.T, b []byte) {
		vs, err := DecodeDeletionBitmap(b)
		if err != nil || len(vs) > 1<<16 {
			return
		}
		got, err := DecodeDeletionBitmap(EncodeDeletionBitmap(vs))
		if err != nil || len(got) > len(vs) {
			t.Fatalf("round trip: %v %v", got, err)
		}
	})
}

package lanceformat

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The test binary links every storage driver, so each fuzz execution pays
// for a large coverage map and every new input is minimized at that cost:
// the seeds are kept to a few hundred bytes so that fuzzing progresses
// (run with -fuzzminimizetime=1s for more throughput).

// manifestSeeds are small manifest files: one and two columns, a
// fragment with a deletion file, inline transaction and index sections.
func manifestSeeds(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	for _, s := range []*arrow.Schema{
		arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil),
		arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32), Nullable: true},
			{Name: "l", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true}}, nil),
	} {
		ls, err := FromArrow(s)
		if err != nil {
			t.Fatal(err)
		}
		last := uint64(3)
		m := &Manifest{Schema: *ls, Version: 4, MaxFragmentID: &last, Fragments: []Fragment{{ID: 3, PhysicalRows: 9,
			Files:    []DataFile{{Path: "a.lance", Fields: []int32{0}, ColumnIndices: []int32{0}, Major: 2}},
			Deletion: &DeletionFile{ReadVersion: 2, ID: 7, NumDeletedRows: 1}}}}
		txn := (&Transaction{Op: OpAppend, ReadVersion: 3, UUID: "u", Properties: map[string]string{"k": "v"}}).Encode()
		out = append(out, encodeManifestFile(m, txn, []byte{10, 0}))
	}
	return out
}

// fileSeeds are small data files of a few rows, one per kind of encoding.
func fileSeeds(t testing.TB) [][]byte {
	t.Helper()
	mem := memory.NewGoAllocator()
	var out [][]byte
	for i, typ := range []arrow.DataType{
		arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String, arrow.FixedWidthTypes.Boolean,
		arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32), arrow.ListOf(arrow.PrimitiveTypes.Int32),
		arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true}),
	} {
		s := arrow.NewSchema([]arrow.Field{{Name: "c", Type: typ, Nullable: typ.ID() != arrow.STRUCT}}, nil)
		rec := randomRecord(mem, s, newRand(uint64(i)), 0, 3, 30)
		out = append(out, writeFile(t, s, 0, rec))
		rec.Release()
	}
	return out
}

// checkManifestFile is the manifest property: hostile input fails
// cleanly, and a decodable manifest re-encodes to one that decodes to the
// same version and fragments.
func checkManifestFile(t *testing.T, b []byte) {
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
	_, _ = mf.m.Schema.ToArrow()
}

// checkDataFile is the data file property: hostile input fails cleanly
// and leaks no Arrow memory.
func checkDataFile(t *testing.T, b []byte) {
	cm := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer cm.AssertSize(t, 0)
	fr, err := OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return
	}
	if r, err := fr.Read(cm); err == nil {
		r.Release()
	}
}

func FuzzDecodeManifestFile(f *testing.F) {
	for _, s := range manifestSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte("LANC"))
	f.Fuzz(checkManifestFile)
}

func FuzzOpenDataFile(f *testing.F) {
	for _, s := range fileSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkDataFile)
}

// TestDecodersSurviveMutations runs both properties over thousands of
// deterministic mutations of the seeds (bytes overwritten, huge varints
// and u64s planted, bytes cut out), the kinds of input that found
// out-of-range slicing, offset overflows and use after release here;
// it covers in `go test` what the slow fuzz engine reaches late.
func TestDecodersSurviveMutations(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	mutate := func(seed []byte) []byte {
		b := bytes.Clone(seed)
		for range 1 + rng.IntN(4) {
			switch i := rng.IntN(len(b) - 8); rng.IntN(4) {
			case 0:
				b[i] = byte(rng.IntN(256))
			case 1:
				b = append(b[:i], append([]byte{0xff, 0xff, 0xff, 0xff, 0x7f}, b[i:]...)...)
			case 2:
				copy(b[i:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f})
			case 3:
				b = append(b[:i], b[i+1+rng.IntN(3):]...)
			}
		}
		return b
	}
	manifests, files := manifestSeeds(t), fileSeeds(t)
	// Plus one large file with every type (too big for a fuzz seed).
	mem := memory.NewGoAllocator()
	rec := randomRecord(mem, allTypesSchema(), newRand(3), 0, 20, 20)
	files = append(files, writeFile(t, allTypesSchema(), 512, rec))
	rec.Release()
	for range 3000 {
		checkManifestFile(t, mutate(manifests[rng.IntN(len(manifests))]))
		checkDataFile(t, mutate(files[rng.IntN(len(files))]))
	}
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

package lancetable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/alloccheck"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/internal/lancetest"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
)

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
		ls, err := lancefile.FromArrow(s)
		if err != nil {
			t.Fatal(err)
		}
		last := uint32(3)
		m := &Manifest{Schema: *ls, Version: 4, MaxFragmentID: &last, Fragments: []Fragment{{ID: 3, PhysicalRows: 9,
			Files:    []DataFile{{Path: "a.lance", Fields: []int32{0}, ColumnIndices: []int32{0}, Major: 2}},
			Deletion: &DeletionFile{ReadVersion: 2, ID: 7, NumDeletedRows: 1}}}}
		txn, err := (&Transaction{Op: OpAppend, ReadVersion: 3, UUID: "u", Properties: map[string]string{"k": "v"}}).Encode()
		if err != nil {
			t.Fatal(err)
		}
		file, err := encodeManifestFile(m, txn, []byte{10, 0})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, file)
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
	file, err := encodeManifestFile(mf.m, mf.txn, mf.index)
	if err != nil {
		t.Fatalf("decoded manifest does not re-encode: %v", err)
	}
	again, err := decodeManifestFile(file)
	if err != nil {
		t.Fatalf("re-encoded manifest does not decode: %v", err)
	}
	if again.m.Version != mf.m.Version || len(again.m.Fragments) != len(mf.m.Fragments) {
		t.Fatalf("round trip changed the manifest")
	}
	_, _ = DecodeTransaction(mf.txn)
	_, _ = mf.m.Schema.ToArrow()
}

// hostileManifestSeeds are a manifest file cut short at the front and one
// whose manifest section states a length of 4 GiB.
func hostileManifestSeeds(t testing.TB) map[string][]byte {
	valid := manifestSeeds(t)[0]
	inflated := bytes.Clone(valid)
	pos := binary.LittleEndian.Uint64(inflated[len(inflated)-manifestTail:])
	binary.LittleEndian.PutUint32(inflated[pos:], 0xFFFFFFFF)
	return map[string][]byte{"truncated": valid[8:], "inflated": inflated}
}

func FuzzDecodeManifestFile(f *testing.F) {
	for _, s := range manifestSeeds(f) {
		f.Add(s)
	}
	for _, s := range hostileManifestSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte("LANC"))
	f.Fuzz(checkManifestFile)
}

func TestManifestAllocationBounded(t *testing.T) {
	for name, b := range hostileManifestSeeds(t) {
		var err error
		alloccheck.Below(t, name, func() { _, err = decodeManifestFile(b) })
		if err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// fragmentRows is the fragment size the deletion-file fuzz targets decode
// against.
const fragmentRows = 1 << 20

// deletionBitmapSeeds are a valid bitmap, the same truncated, the 512 KiB
// file that made the hand-written decoder allocate 16 GiB (2^16 containers
// each declaring 2^16 rows, their bytes absent), and a valid run-container
// bitmap of 2^32 rows in under 1 MiB (beyond any fragment).
func deletionBitmapSeeds() map[string][]byte {
	valid := EncodeDeletionBitmap([]uint32{1, 5, 70000})
	inflated := make([]byte, 512<<10)
	binary.LittleEndian.PutUint32(inflated, 12346) // no run containers
	binary.LittleEndian.PutUint32(inflated[4:], 1<<16)
	for i := range 1 << 16 {
		binary.LittleEndian.PutUint16(inflated[8+4*i:], uint16(i))
		binary.LittleEndian.PutUint16(inflated[8+4*i+2:], 0xFFFF)
	}
	// Cookie 12347 with 2^16 containers: is-run bitmap, keys and
	// cardinalities, offsets, then one run [0, 65535] per container.
	runs := binary.LittleEndian.AppendUint32(nil, 12347|0xFFFF<<16)
	runs = append(runs, bytes.Repeat([]byte{0xFF}, 8192)...)
	for i := range 1 << 16 {
		runs = binary.LittleEndian.AppendUint32(runs, uint32(i)|0xFFFF<<16)
	}
	runs = append(runs, make([]byte, 4<<16)...)
	for range 1 << 16 {
		runs = append(runs, 1, 0, 0, 0, 0xFF, 0xFF)
	}
	return map[string][]byte{"valid": valid, "truncated": valid[:len(valid)-3], "inflated": inflated, "runs": runs}
}

// FuzzDeletionBitmap: hostile roaring bitmaps fail cleanly and never
// decode to more offsets than the fragment has rows; encoded ones decode
// to the same offsets.
func FuzzDeletionBitmap(f *testing.F) {
	for _, s := range deletionBitmapSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		vs, err := DecodeDeletionBitmap(b, fragmentRows)
		if err != nil {
			return
		}
		if len(vs) > fragmentRows || (len(vs) > 0 && vs[len(vs)-1] >= fragmentRows) {
			t.Fatalf("%d offsets up to %d decoded for a fragment of %d rows", len(vs), vs[len(vs)-1], fragmentRows)
		}
		got, err := DecodeDeletionBitmap(EncodeDeletionBitmap(vs), fragmentRows)
		if err != nil || !slices.Equal(got, vs) {
			t.Fatalf("round trip: %v %v", got, err)
		}
	})
}

// deletionArrowSeeds are a valid .arrow deletion file as Quiver writes it,
// one ZSTD-compressed as LanceDB writes them, the first truncated, and the
// compressed one with its buffer's stated uncompressed size set to 1 TiB.
func deletionArrowSeeds(t testing.TB) map[string][]byte {
	valid, err := EncodeDeletionArrow([]uint32{1, 5, 70000})
	if err != nil {
		t.Fatal(err)
	}
	rec := func() arrow.RecordBatch {
		b := array.NewUint32Builder(memory.DefaultAllocator)
		defer b.Release()
		b.AppendValues([]uint32{1, 5, 70000}, nil)
		col := b.NewArray()
		defer col.Release()
		return array.NewRecordBatch(deletionSchema, []arrow.Array{col}, 3)
	}()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(deletionSchema), ipc.WithZstd())
	if err == nil {
		err = w.Write(rec)
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	zstd := buf.Bytes()
	// A compressed IPC buffer is [i64 uncompressed size][ZSTD frame].
	frame := bytes.Index(zstd, []byte{0x28, 0xb5, 0x2f, 0xfd})
	if frame < 8 {
		t.Fatal("no ZSTD frame in the compressed deletion file")
	}
	inflated := bytes.Clone(zstd)
	binary.LittleEndian.PutUint64(inflated[frame-8:], 1<<40)
	return map[string][]byte{"valid": valid, "zstd": zstd, "truncated": valid[:len(valid)-7], "inflated": inflated,
		"children bomb": childrenBombDeletionArrow(t)}
}

// FuzzDeletionArrow: hostile .arrow deletion files fail cleanly and never
// decode offsets past the fragment.
func FuzzDeletionArrow(f *testing.F) {
	for _, s := range deletionArrowSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		vs, err := DecodeDeletionArrow(b, fragmentRows)
		if err != nil {
			return
		}
		for _, v := range vs {
			if v >= fragmentRows {
				t.Fatalf("offset %d decoded for a fragment of %d rows", v, fragmentRows)
			}
		}
	})
}

// TestDeletionDecodersAllocationBounded: hostile deletion files are
// refused before anything is sized from their headers. The 512 KiB
// "inflated" bitmap made the hand-written decoder allocate 16 GiB.
func TestDeletionDecodersAllocationBounded(t *testing.T) {
	for name, b := range deletionBitmapSeeds() {
		var err error
		alloccheck.Below(t, "bitmap "+name, func() { _, err = DecodeDeletionBitmap(b, fragmentRows) })
		if (name == "valid") != (err == nil) {
			t.Errorf("bitmap %s: err %v", name, err)
		}
		if err != nil && !errors.Is(err, writers.ErrInvalid) {
			t.Errorf("bitmap %s: %v does not wrap ErrInvalid", name, err)
		}
	}
	for name, b := range deletionArrowSeeds(t) {
		var err error
		alloccheck.Below(t, "arrow "+name, func() { _, err = DecodeDeletionArrow(b, fragmentRows) })
		if (name == "valid" || name == "zstd") != (err == nil) {
			t.Errorf("arrow %s: err %v", name, err)
		}
	}
}

// TestDeletionBitmapOfClaimedRows: a fragment's row count is the
// manifest's claim. A few kilobytes of run containers deleting 2^27 rows
// of a fragment claiming 2^32-1 are refused before they are materialised
// (512 MiB of offsets, 16 GiB at 2^32 deletions: the process would die
// out of memory).
func TestDeletionBitmapOfClaimedRows(t *testing.T) {
	bm := roaring.New()
	bm.AddRange(0, 1<<27)
	bm.RunOptimize()
	var buf bytes.Buffer
	if _, err := bm.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	var err error
	alloccheck.Below(t, "bitmap", func() { _, err = DecodeDeletionBitmap(buf.Bytes(), 1<<32-1) })
	if !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("a %d-byte bitmap deleting 2^27 rows: err %v, want ErrInvalid", buf.Len(), err)
	}
}

// TestDeletionFileBound: no deletion file is written with more offsets
// than the reader takes (maxDeletions, lowered here), and the reader
// refuses one that has them.
func TestDeletionFileBound(t *testing.T) {
	defer func(n int) { maxDeletions = n }(maxDeletions)
	maxDeletions = 6000
	offs := make([]uint32, maxDeletions+1)
	for i := range offs {
		offs[i] = uint32(3 * i)
	}
	if _, _, err := NewDeletionFile(1, offs); !errors.Is(err, writers.ErrWrongState) {
		t.Fatalf("writing %d deletions: err %v, want ErrWrongState", len(offs), err)
	}
	if _, err := DecodeDeletionBitmap(EncodeDeletionBitmap(offs), 1<<20); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("reading %d deletions: err %v, want ErrInvalid", len(offs), err)
	}
	if _, b, err := NewDeletionFile(1, offs[:maxDeletions]); err != nil {
		t.Fatal(err)
	} else if got, err := DecodeDeletionBitmap(b, 1<<20); err != nil || len(got) != maxDeletions {
		t.Fatalf("%d deletions read back as %d: %v", maxDeletions, len(got), err)
	}
}

// TestManifestsSurviveMutations runs the manifest property over
// thousands of deterministic mutations of the seeds (lancetest.Mutate);
// it covers in `go test` what the slow fuzz engine reaches late.
func TestManifestsSurviveMutations(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	manifests := manifestSeeds(t)
	for range 3000 {
		checkManifestFile(t, lancetest.Mutate(rng, manifests[rng.IntN(len(manifests))]))
	}
}

// TestManifestHostileSchemaAndFragments: a manifest another process wrote
// whose schema fields loop through their parents (readers recursed until
// the stack overflowed), name a missing parent or repeat an id, or whose
// fragments repeat an id, is ErrInvalid; a max_fragment_id below the
// fragments listed does not hand out a taken id.
func TestManifestHostileSchemaAndFragments(t *testing.T) {
	encode := func(m *Manifest) []byte {
		file, err := encodeManifestFile(m, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return file
	}
	field := func(id, parent int32, typ string) lancefile.Field {
		return lancefile.Field{Name: fmt.Sprint("f", id), ID: id, ParentID: parent, LogicalType: typ, Nullable: true}
	}
	schemas := map[string][]lancefile.Field{
		"its own parent":  {field(-1, -1, "struct")},
		"parents cycle":   {field(0, -1, "int64"), field(1, 2, "struct"), field(2, 1, "struct")},
		"missing parent":  {field(0, 7, "int64")},
		"id twice":        {field(0, -1, "int64"), field(0, -1, "int64")},
		"deeper than 128": nil,
	}
	deep := []lancefile.Field{field(0, -1, "struct")}
	for id := int32(1); id <= 130; id++ {
		deep = append(deep, field(id, id-1, "struct"))
	}
	schemas["deeper than 128"] = deep
	for name, fields := range schemas {
		_, err := decodeManifestFile(encode(&Manifest{Schema: lancefile.Schema{Fields: fields}, Version: 1}))
		if !errors.Is(err, writers.ErrInvalid) {
			t.Errorf("schema field %s: %v, want ErrInvalid", name, err)
		}
	}

	frag := func(id uint64) Fragment {
		return Fragment{ID: id, PhysicalRows: 1, Files: []DataFile{{Path: fmt.Sprint(id, ".lance"), Fields: []int32{0}, ColumnIndices: []int32{0}, Major: 2}}}
	}
	ok := lancefile.Schema{Fields: []lancefile.Field{field(0, -1, "int64")}}
	if _, err := decodeManifestFile(encode(&Manifest{Schema: ok, Version: 1, Fragments: []Fragment{frag(1), frag(1)}})); !errors.Is(err, writers.ErrInvalid) {
		t.Errorf("fragment 1 twice: %v, want ErrInvalid", err)
	}
	low := uint32(0)
	mf, err := decodeManifestFile(encode(&Manifest{Schema: ok, Version: 1, MaxFragmentID: &low, Fragments: []Fragment{frag(0), frag(1)}}))
	if err != nil {
		t.Fatal(err)
	}
	if next := mf.m.nextFragmentID(); next != 2 {
		t.Errorf("next fragment id %d after fragments 0 and 1 (max_fragment_id 0), want 2", next)
	}
}

package lancefile

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/alloccheck"
	"github.com/quiver-ingest/quiver/writers/lance/internal/lancetest"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile/lanceenc"
)

// The test binary links every storage driver, so each fuzz execution pays
// for a large coverage map and every new input is minimized at that cost:
// the seeds are kept to a few hundred bytes so that fuzzing progresses
// (run with -fuzzminimizetime=1s for more throughput).

// fileSeeds are small data files of a few rows, one per kind of encoding
// and file format (2.0; 2.1 and 2.2 without lists and vectors, whose
// pages are too large for a quick seed).
func fileSeeds(t testing.TB) [][]byte {
	t.Helper()
	mem := memory.NewGoAllocator()
	var out [][]byte
	for minor := range uint16(3) {
		for i, typ := range []arrow.DataType{
			arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String, arrow.FixedWidthTypes.Boolean,
			arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32), arrow.ListOf(arrow.PrimitiveTypes.Int32),
			arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true}),
		} {
			if minor > 0 && (typ.ID() == arrow.LIST || typ.ID() == arrow.FIXED_SIZE_LIST) {
				continue
			}
			s := arrow.NewSchema([]arrow.Field{{Name: "c", Type: typ, Nullable: typ.ID() != arrow.STRUCT}}, nil)
			rec := lancetest.RandomRecord(mem, s, lancetest.NewRand(uint64(i)), 0, 3, 30)
			out = append(out, writeFileV(t, s, 0, minor, rec))
			rec.Release()
		}
	}
	// Full-zip pages: a string and a list of strings wider than a
	// mini-block chunk (zstd-compressed per value, so the file stays small).
	for minor := uint16(1); minor <= 2; minor++ {
		out = append(out, writeFileV(t, wideSeedSchema, 0, minor, wideSeed(mem)))
	}
	// Quiver's dictionary, map and dictionary-string pages, and the same
	// file with an inline bit-packing width word of its top bit set (as an
	// int it was negative and passed the width check).
	cats := categoricalSeed(t, mem)
	out = append(out, cats, plantedWidth(t, cats))
	// pylance's own files hold the pages Quiver does not write (FSST,
	// dictionaries, all-null with levels): their decoders need seeds too
	// (testdata/lance-formats, make lance-fixtures).
	pylance, err := filepath.Glob("../../../testdata/lance-formats/v2_*/*.lance/data/*.lance")
	if err != nil || len(pylance) == 0 {
		t.Fatalf("pylance fixture files: %v (found %d)", err, len(pylance))
	}
	for _, p := range pylance {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

var categoricalSchema = arrow.NewSchema([]arrow.Field{
	{Name: "n", Type: arrow.PrimitiveTypes.Int64},
	{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, Nullable: true},
	{Name: "cat", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), Nullable: true},
}, nil)

// categoricalSeed is a 2.2 file of 200 rows of categoricalSchema: small
// integers (bit-packed to 10 bits), a dictionary column with nulls, few
// distinct strings (a dictionary-encoded page) and maps (null, empty,
// with entries).
func categoricalSeed(t testing.TB, mem memory.Allocator) []byte {
	b := array.NewRecordBuilder(mem, categoricalSchema)
	defer b.Release()
	colors := []string{"red", "green", "blue"}
	for i := range 200 {
		b.Field(0).(*array.Int64Builder).Append(int64(i * 5))
		if db := b.Field(1).(*array.BinaryDictionaryBuilder); i%7 == 3 {
			db.AppendNull()
		} else if err := db.AppendString(colors[i%3]); err != nil {
			t.Fatal(err)
		}
		b.Field(2).(*array.StringBuilder).AppendValues([]string{colors[i%3]}, []bool{i%9 != 0})
		mb := b.Field(3).(*array.MapBuilder)
		if i%6 == 0 {
			mb.AppendNull()
			continue
		}
		mb.Append(true)
		for j := range i % 3 {
			mb.KeyBuilder().(*array.StringBuilder).Append(colors[j])
			mb.ItemBuilder().(*array.Int64Builder).Append(int64(i * j))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	return writeFileV(t, categoricalSchema, 0, 2, rec)
}

// plantedWidth is file with its first 64-bit inline bit-packing width
// word (10: column n's values are below 1,024; in the chunks, its first
// page's second buffer) set to all ones.
func plantedWidth(t testing.TB, file []byte) []byte {
	fr, err := OpenFile(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.Clone(file)
	chunks := int(fr.columns[0][0].offsets[1])
	i := chunks + bytes.Index(out[chunks:], binary.LittleEndian.AppendUint64(nil, 10))
	if i < chunks {
		t.Fatal("no bit-packing width word of 10 in the seed")
	}
	copy(out[i:], bytes.Repeat([]byte{0xff}, 8))
	return out
}

var wideSeedSchema = arrow.NewSchema([]arrow.Field{
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "l", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
}, nil)

// wideSeed is three rows of wideSeedSchema: a 9,000-byte value, a null
// and a short one; the same in a list, then a null and an empty list.
func wideSeed(mem memory.Allocator) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, wideSeedSchema)
	defer b.Release()
	wide := string(bytes.Repeat([]byte("wide "), 1800))
	s, l := b.Field(0).(*array.StringBuilder), b.Field(1).(*array.ListBuilder)
	s.AppendValues([]string{wide, "", "short"}, []bool{true, false, true})
	l.Append(true)
	l.ValueBuilder().(*array.StringBuilder).AppendValues([]string{"a", wide}, nil)
	l.AppendNull()
	l.Append(true)
	return b.NewRecordBatch()
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
		ReleaseRecords(r)
	}
}

// hostileFileSeeds are a data file cut short at the front (the footer's
// offsets point before the file) and one whose footer claims 2^32-1
// columns.
func hostileFileSeeds(t testing.TB) map[string][]byte {
	valid := fileSeeds(t)[0]
	inflated := bytes.Clone(valid)
	binary.LittleEndian.PutUint32(inflated[len(inflated)-footerLen+28:], 0xFFFFFFFF)
	return map[string][]byte{"truncated": valid[len(valid)/2:], "inflated": inflated}
}

func FuzzOpenDataFile(f *testing.F) {
	for _, s := range fileSeeds(f) {
		f.Add(s)
	}
	for _, s := range hostileFileSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkDataFile)
}

// TestDataFileAllocationBounded: hostile data files fail before their
// stated sizes are allocated, including pages whose decoded size no bytes
// back: an all-null page of 2^26 int64 rows (512 MiB) and a dictionary
// page repeating a 1 MiB item 1024 times.
func TestDataFileAllocationBounded(t *testing.T) {
	for name, b := range hostileFileSeeds(t) {
		var err error
		alloccheck.Below(t, name, func() {
			_, err = OpenFile(bytes.NewReader(b), int64(len(b)))
		})
		if err == nil {
			t.Errorf("%s: opened", name)
		}
	}
	var err error
	alloccheck.Below(t, "all-null page", func() {
		_, err = decodeLeaf(lanceenc.NewBudget(0), arrow.PrimitiveTypes.Int64, nullableEnc(allNulls, nil, nil), nil, lanceenc.MaxPageRows)
	})
	if err == nil {
		t.Error("all-null page of 2^26 int64 rows decoded")
	}
	item := bytes.Repeat([]byte{'x'}, 1<<20)
	ends := binary.LittleEndian.AppendUint32(nil, uint32(len(item)))
	idx := bytes.Repeat([]byte{1}, 1024)
	dict := &aenc{kind: aeDictionary, values: flatEnc(8, 0), numItems: 1,
		bytes: &aenc{kind: aeBinary, values: flatEnc(32, 1), bytes: flatEnc(8, 2)}}
	alloccheck.Below(t, "dictionary page", func() {
		_, err = decodeLeaf(lanceenc.NewBudget(0), arrow.BinaryTypes.String, dict, [][]byte{idx, ends, item}, len(idx))
	})
	if err == nil {
		t.Error("dictionary page expanding to 1 GiB decoded")
	}
}

// TestDictionaryLastItem: a dictionary index naming the last item decodes
// (String's ValueOffset64 refuses an index equal to its length).
func TestDictionaryLastItem(t *testing.T) {
	ends := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 1), 3)
	dict := &aenc{kind: aeDictionary, values: flatEnc(8, 0), numItems: 2,
		bytes: &aenc{kind: aeBinary, values: flatEnc(32, 1), bytes: flatEnc(8, 2)}}
	d, err := decodeLeaf(lanceenc.NewBudget(0), arrow.BinaryTypes.String, dict, [][]byte{{2, 0, 1}, ends, []byte("abc")}, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	a := array.NewStringData(d)
	defer a.Release()
	if a.Value(0) != "bc" || a.IsValid(1) || a.Value(2) != "a" {
		t.Fatalf("decoded %v", a)
	}
}

// TestDataFilesSurviveMutations runs the data file property over
// thousands of deterministic mutations of the seeds (lancetest.Mutate);
// it covers in `go test` what the slow fuzz engine reaches late.
func TestDataFilesSurviveMutations(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	files := fileSeeds(t)
	// Plus one large file with every type (too big for a fuzz seed).
	mem := memory.NewGoAllocator()
	rec := lancetest.RandomRecord(mem, lancetest.AllTypesSchema(), lancetest.NewRand(3), 0, 20, 20)
	files = append(files, writeFile(t, lancetest.AllTypesSchema(), 512, rec))
	rec.Release()
	for minor := uint16(1); minor <= 2; minor++ {
		fs := formatSchema(minor)
		r := lancetest.RandomRecord(mem, fs, lancetest.NewRand(4), 0, 20, 20)
		files = append(files, writeFileV(t, fs, 512, minor, r))
		r.Release()
	}
	// And pylance's own 2.1 and 2.2 files of the types, maps, packed and
	// blobs tables (FSST, dictionaries, LZ4, run lengths, full-zip,
	// constant pages, lists, maps, variable packed structs, blob pages).
	for _, v := range []string{"v2_1", "v2_2"} {
		names, _ := filepath.Glob(filepath.Join(lancetest.FixtureDir(t), v, "[tmpb]*.lance", "data", "*.lance"))
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, b)
		}
	}
	for _, f := range files {
		checkDataFile(t, f)
	}
	for range 3000 {
		checkDataFile(t, lancetest.Mutate(rng, files[rng.IntN(len(files))]))
	}
}

// sparseFile is a file of size bytes, zeros but for tail at its end.
type sparseFile struct {
	size int64
	tail []byte
}

func (f sparseFile) ReadAt(p []byte, off int64) (int, error) {
	clear(p)
	base := f.size - int64(len(f.tail))
	for i := range p {
		if at := off + int64(i); at >= base && at < f.size {
			p[i] = f.tail[at-base]
		}
	}
	return len(p), nil
}

// TestDataFileMetadataCapAfterGlobalBuffer: a file descriptor (global
// buffer 0) placed at the file's start lowers where the metadata read
// begins; the cap on that read holds after it too, instead of reading a
// 300 MiB file whole.
func TestDataFileMetadataCapAfterGlobalBuffer(t *testing.T) {
	const size = 300 << 20
	end := uint64(size - footerLen)
	tail := binary.LittleEndian.AppendUint64(nil, 0)  // global buffer 0 at offset 0,
	tail = binary.LittleEndian.AppendUint64(tail, 16) // 16 bytes long
	tail = binary.LittleEndian.AppendUint64(tail, end-16)
	tail = binary.LittleEndian.AppendUint64(tail, end-16) // no columns
	tail = binary.LittleEndian.AppendUint64(tail, end-16) // the global buffer offsets
	tail = binary.LittleEndian.AppendUint32(tail, 1)
	tail = binary.LittleEndian.AppendUint32(tail, 0)
	tail = binary.LittleEndian.AppendUint16(tail, 2)
	tail = binary.LittleEndian.AppendUint16(tail, 0)
	tail = append(tail, Magic...)
	var err error
	alloccheck.Below(t, "a descriptor at the start of a 300 MiB file", func() {
		_, err = OpenFile(sparseFile{size, tail}, size)
	})
	if err == nil || !strings.Contains(err.Error(), "exceeds the limit") {
		t.Fatalf("err %v, want the metadata limit", err)
	}
}

// TestReadColumnIndexOutOfRange: a column index a manifest states below
// zero or past the file's columns is an error, not a panic.
func TestReadColumnIndexOutOfRange(t *testing.T) {
	f := &FileReader{columns: make([][]pageRef, 1)}
	for _, col := range []int{-1, 1} {
		if _, _, err := f.readColumn(memory.DefaultAllocator, lanceenc.NewBudget(0), arrow.PrimitiveTypes.Int64, col); err == nil {
			t.Errorf("column %d of a file of 1: no error", col)
		}
	}
}

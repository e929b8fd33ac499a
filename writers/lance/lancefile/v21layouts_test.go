package lancefile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/lance/internal/lancetest"
)

// packedRow is a variable packed struct row of fields, each given as its
// bytes: fixed-width ones as they are, others after a 32-bit length.
func packedRow(fields ...any) []byte {
	var out []byte
	for _, f := range fields {
		switch v := f.(type) {
		case int32:
			out = binary.LittleEndian.AppendUint32(out, uint32(v))
		case string:
			out = binary.LittleEndian.AppendUint32(out, uint32(len(v)))
			out = append(out, v...)
		case []byte: // a nested row
			out = binary.LittleEndian.AppendUint32(out, uint32(len(v)))
			out = append(out, v...)
		}
	}
	return out
}

// TestVariablePackedRows: rows of a variable packed struct (an int32, a
// string, a nested struct of an int32 and a string) split into the
// struct's fields, null and empty rows included; rows whose lengths point
// past the row, that end inside a field or leave bytes over are refused.
func TestVariablePackedRows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	inner := arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32}, arrow.Field{Name: "s", Type: arrow.BinaryTypes.String})
	st := arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32}, arrow.Field{Name: "s", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "in", Type: inner})
	rows := func(vs ...[]byte) *array.LargeBinary {
		b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.LargeBinary)
		defer b.Release()
		for _, v := range vs {
			if v == nil {
				b.AppendNull()
			} else {
				b.Append(v)
			}
		}
		return b.NewArray().(*array.LargeBinary)
	}
	good := rows(packedRow(int32(7), "seven", packedRow(int32(70), "x")), nil, packedRow(int32(-1), "", packedRow(int32(0), "")))
	defer good.Release()
	got, err := unpackVarStruct(newBudget(1<<20), st, good)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if err := array.ValidateFull(got); err != nil {
		t.Fatal(err)
	}
	if g, w := got.String(), `{[7 (null) -1] ["seven" (null) ""] {[70 (null) 0] ["x" (null) ""]}}`; g != w {
		t.Errorf("got %s\nwant %s", g, w)
	}
	// Null rows of a struct of a 16 MiB field: their zeroes are charged.
	wide := arrow.StructOf(arrow.Field{Name: "b", Type: &arrow.FixedSizeBinaryType{ByteWidth: 16 << 20}}, arrow.Field{Name: "s", Type: arrow.BinaryTypes.String})
	nulls := rows(nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil)
	if a, err := unpackVarStruct(newBudget(1<<20), wide, nulls); err == nil || !strings.Contains(err.Error(), "limit") {
		if a != nil {
			a.Release()
		}
		t.Errorf("17 null rows of 16 MiB each: %v", err)
	}
	nulls.Release()
	row := packedRow(int32(7), "seven", packedRow(int32(70), "x"))
	for name, bad := range map[string][]byte{
		"length past the row": binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 1), 1<<30),
		"ends inside a field": row[:2],
		"bytes left over":     append(bytes.Clone(row), 0),
		"nested length past":  packedRow(int32(7), "seven", []byte{1, 2}),
	} {
		r := rows(bad)
		if a, err := unpackVarStruct(newBudget(1<<20), st, r); err == nil {
			a.Release()
			t.Errorf("%s: accepted", name)
		}
		r.Release()
	}
}

// TestVariablePackedNullRowsCharged: null rows of a packed struct of 200
// string fields cost each field an offset (and its 32-bit copy) though
// the file holds nothing for them: 100,000 of them are charged 240 MB,
// refused under a smaller budget.
func TestVariablePackedNullRowsCharged(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fields := make([]arrow.Field, 200)
	for i := range fields {
		fields[i] = arrow.Field{Name: fmt.Sprint("s", i), Type: arrow.BinaryTypes.String}
	}
	st := arrow.StructOf(fields...)
	const n = 100_000
	rows := array.MakeArrayOfNull(mem, arrow.BinaryTypes.LargeBinary, n).(*array.LargeBinary)
	defer rows.Release()
	const want = n * 200 * 12
	if a, err := unpackVarStruct(&budget{unbacked: want - 1}, st, rows); err == nil || !strings.Contains(err.Error(), "limit") {
		if a != nil {
			a.Release()
		}
		t.Fatalf("100,000 null rows of 200 string fields under a %d-byte budget: %v", want-1, err)
	}
	bud := &budget{unbacked: 1 << 30}
	a, err := unpackVarStruct(bud, st, rows)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	if spent := 1<<30 - bud.unbacked; spent < want {
		t.Errorf("charged %d bytes, want at least %d", spent, want)
	}
}

// TestBlobPages: the blob v1 fixture's values (empty, null and out of
// line) read back as written, and a description pointing past the end of
// the file is refused.
func TestBlobPages(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	names, err := filepath.Glob(filepath.Join(lancetest.FixtureDir(t), "v2_1", "blobs.lance", "data", "*.lance"))
	if err != nil || len(names) != 1 {
		t.Fatalf("blob fixture files %v, %v", names, err)
	}
	file, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	rec := readFile(t, mem, file)
	blobs := rec.Column(1).(*array.LargeBinary)
	for _, i := range []int{0, 1, 2, 49} { // null, empty, 41 bytes, 981 bytes
		switch {
		case i%9 == 0:
			if blobs.IsValid(i) {
				t.Errorf("row %d: %d bytes, want null", i, len(blobs.Value(i)))
			}
		case i%10 == 1:
			if blobs.IsNull(i) || len(blobs.Value(i)) != 0 {
				t.Errorf("row %d: want empty", i)
			}
		default:
			if v := blobs.Value(i); !bytes.Equal(v, bytes.Repeat([]byte{byte(i % 251)}, i%50*20+1)) {
				t.Errorf("row %d: %d bytes", i, len(v))
			}
		}
	}
	rec.Release()
	// Row 2's description (41 bytes at some position) moved past the end.
	at := blobDescAt(file, 41)
	if at < 0 {
		t.Fatal("row 2's description not found")
	}
	bad := bytes.Clone(file)
	binary.LittleEndian.PutUint64(bad[at:], uint64(len(file)))
	fr, err := OpenFile(bytes.NewReader(bad), int64(len(bad)))
	if err != nil {
		t.Fatal(err)
	}
	if recs, err := fr.Read(mem); err == nil || !strings.Contains(err.Error(), "outside the file") {
		ReleaseRecords(recs)
		t.Fatalf("a description past the file's end: %v", err)
	}
	// Rows 2 to 4 described as 1 GiB each at position 0 (in a file said
	// to be 4 GiB, under a large budget): 3 GiB read as binary would wrap
	// its 32-bit offsets, and is refused before anything is read.
	bad = bytes.Clone(file)
	for _, size := range []uint64{41, 61, 81} {
		at := blobDescAt(bad, size)
		if at < 0 {
			t.Fatalf("the description of %d bytes not found", size)
		}
		binary.LittleEndian.PutUint64(bad[at:], 0)
		binary.LittleEndian.PutUint64(bad[at+8:], 1<<30)
	}
	fr, err = OpenFile(bytes.NewReader(bad), int64(len(bad)))
	if err != nil {
		t.Fatal(err)
	}
	fr.size = 4 << 30
	bud := &budget{buffers: uint64(len(bad)), unbacked: maxUnbackedBytes, decoded: 1 << 40}
	a, err := fr.readPage21(mem, bud, arrow.BinaryTypes.Binary, fr.columns[1][0])
	if err == nil || !strings.Contains(err.Error(), "32-bit offsets") {
		if a != nil {
			a.Release()
		}
		t.Fatalf("blob values of 3 GiB as binary: %v", err)
	}
}

// blobDescAt is the position in file of the blob description of a value
// of size bytes (a position inside the file, then the size), or -1.
func blobDescAt(file []byte, size uint64) int {
	desc := binary.LittleEndian.AppendUint64(nil, size)
	for i := 8; i+8 <= len(file); i++ {
		if pos := binary.LittleEndian.Uint64(file[i-8:]); bytes.Equal(file[i:i+8], desc) && pos > 0 && pos < uint64(len(file)) {
			return i - 8
		}
	}
	return -1
}

package lancefile

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/lance/internal/lancetest"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile/lanceenc"
)

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
	bud := lanceenc.NewBudget(fr.size)
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

package lancetable

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/quiver-ingest/quiver/writers"
)

// deletionSchema is the exact schema Lance requires of .arrow deletion
// files (compared strictly: no metadata, not nullable).
var deletionSchema = arrow.NewSchema([]arrow.Field{{Name: "row_id", Type: arrow.PrimitiveTypes.Uint32}}, nil)

// EncodeDeletionArrow returns an Arrow IPC file with the deleted row
// offsets (Lance's ARROW_ARRAY deletion file).
func EncodeDeletionArrow(offsets []uint32) ([]byte, error) {
	b := array.NewUint32Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(offsets, nil)
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(deletionSchema, []arrow.Array{col}, int64(len(offsets)))
	defer rec.Release()
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(deletionSchema))
	if err != nil {
		return nil, err
	}
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// maxArrowDeletionBytes bounds the Arrow memory an .arrow deletion file
// may decode to (16M offsets). Lance writes .arrow files for fewer than
// 5000 deleted rows (larger sets go to .bin); the bound matters because a
// ZSTD-compressed IPC buffer states its own uncompressed size, which
// arrow-go allocates before decompressing.
const maxArrowDeletionBytes = 64 << 20

// maxDeletions bounds the deleted offsets of one fragment a deletion
// bitmap may hold, read or written: 64Mi (256 MiB of offsets), every row
// of the largest fragments common writers make (LanceDB and pylance 1Mi
// rows, Ray's write_lance 64Mi). A var for tests.
var maxDeletions = 1 << 26

// DecodeDeletionArrow reads the offsets of an .arrow deletion file
// (ZSTD-compressed IPC bodies, as LanceDB writes them, included) of a
// fragment of rows physical rows. Decoding allocates at most
// maxArrowDeletionBytes beyond b; an offset at or past rows, or malformed
// input, is an error wrapping writers.ErrInvalid.
func DecodeDeletionArrow(b []byte, rows uint64) (out []uint32, err error) {
	// arrow-go panics on some malformed input (dictionary batches are
	// decoded without a recover), and so does cappedAllocator past its
	// limit.
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("lance: deletion file: %w: %v", writers.ErrInvalid, p)
		}
	}()
	if err := checkArrowFooter(b); err != nil {
		return nil, fmt.Errorf("lance: deletion file: %w: %w", writers.ErrInvalid, err)
	}
	mem := &cappedAllocator{mem: memory.DefaultAllocator, left: maxArrowDeletionBytes}
	r, err := ipc.NewFileReader(bytes.NewReader(b), ipc.WithAllocator(mem))
	if err != nil {
		return nil, fmt.Errorf("lance: deletion file: %w: %w", writers.ErrInvalid, err)
	}
	defer r.Close()
	if f := r.Schema().Fields(); len(f) != 1 || f[0].Type.ID() != arrow.UINT32 {
		return nil, fmt.Errorf("lance: deletion file schema %s is not row_id: uint32: %w", r.Schema(), writers.ErrInvalid)
	}
	for i := range r.NumRecords() {
		rec, err := r.RecordBatch(i)
		if err != nil {
			return nil, fmt.Errorf("lance: deletion file, record batch %d: %w: %w", i, writers.ErrInvalid, err)
		}
		vs := rec.Column(0).(*array.Uint32).Uint32Values()
		if len(out)+len(vs) > maxArrowDeletionBytes/4 {
			return nil, fmt.Errorf("lance: deletion file holds more than %d offsets: %w", maxArrowDeletionBytes/4, writers.ErrInvalid)
		}
		for _, v := range vs {
			if uint64(v) >= rows {
				return nil, fmt.Errorf("lance: deletion file deletes offset %d of a fragment of %d rows: %w", v, rows, writers.ErrInvalid)
			}
		}
		out = append(out, vs...)
	}
	return out, nil
}

// cappedAllocator refuses, by panicking, to hold more than left bytes at
// once.
type cappedAllocator struct {
	mem  memory.Allocator
	left int
}

// take charges n bytes (negative: gives them back).
func (a *cappedAllocator) take(n int) {
	if n > a.left {
		panic(fmt.Errorf("decoding needs %d more bytes than the %d-byte limit allows", n, maxArrowDeletionBytes))
	}
	a.left -= n
}

func (a *cappedAllocator) Allocate(size int) []byte {
	a.take(size)
	return a.mem.Allocate(size)
}

func (a *cappedAllocator) Reallocate(size int, b []byte) []byte {
	a.take(size - len(b))
	return a.mem.Reallocate(size, b)
}

func (a *cappedAllocator) Free(b []byte) {
	a.take(-len(b))
	a.mem.Free(b)
}

// Portable roaring bitmap cookie of a bitmap without run containers.
const (
	roaringNoRuns = 12346
)

// EncodeDeletionBitmap returns a 32-bit roaring bitmap in the portable
// serialization (Lance's BITMAP deletion file), with array and bitmap
// containers only, byte for byte what LanceDB writes (roaring-go would
// pick run containers for consecutive offsets). offsets is not modified;
// sorted and distinct offsets (what merges pass) are encoded without a
// copy.
func EncodeDeletionBitmap(offsets []uint32) []byte {
	vs := offsets
	if !sortedDistinct(vs) {
		vs = slices.Clone(offsets)
		slices.Sort(vs)
		vs = slices.Compact(vs)
	}
	// Containers as ranges of vs: [start, end) share their high 16 bits.
	type container struct {
		key        uint16
		start, end int
	}
	var cs []container
	for i, v := range vs {
		k := uint16(v >> 16)
		if len(cs) == 0 || cs[len(cs)-1].key != k {
			cs = append(cs, container{key: k, start: i})
		}
		cs[len(cs)-1].end = i + 1
	}
	size := 8 + 8*len(cs)
	for _, c := range cs {
		size += min(2*(c.end-c.start), 8192)
	}
	out := make([]byte, 0, size)
	out = binary.LittleEndian.AppendUint32(out, roaringNoRuns)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(cs)))
	for _, c := range cs {
		out = binary.LittleEndian.AppendUint16(out, c.key)
		out = binary.LittleEndian.AppendUint16(out, uint16(c.end-c.start-1))
	}
	pos := len(out) + 4*len(cs)
	for _, c := range cs {
		out = binary.LittleEndian.AppendUint32(out, uint32(pos))
		pos += min(2*(c.end-c.start), 8192)
	}
	for _, c := range cs {
		if c.end-c.start > 4096 {
			bm := out[len(out) : len(out)+8192]
			for _, v := range vs[c.start:c.end] {
				bm[uint16(v)/8] |= 1 << (v % 8)
			}
			out = out[:len(out)+8192]
			continue
		}
		for _, v := range vs[c.start:c.end] {
			out = binary.LittleEndian.AppendUint16(out, uint16(v))
		}
	}
	return out
}

// sortedDistinct reports whether vs ascends strictly.
func sortedDistinct(vs []uint32) bool {
	for i := 1; i < len(vs); i++ {
		if vs[i] <= vs[i-1] {
			return false
		}
	}
	return true
}

// DecodeDeletionBitmap reads a portable 32-bit roaring bitmap (array,
// bitmap and run containers) deleting rows of a fragment of rows physical
// rows, and returns its offsets in ascending order. The bitmap is
// validated (containers present in b, sorted, cardinalities matching)
// before anything is sized from it; an offset at or past rows, or more
// than maxDeletions of them, is an error, so the result never takes more
// than 256 MiB however b declares its containers (rows is the manifest's
// claim, another process's). Malformed input wraps writers.ErrInvalid.
func DecodeDeletionBitmap(b []byte, rows uint64) ([]uint32, error) {
	bm := roaring.New()
	// roaring checks the container count (at most 2^16) and reads every
	// container's bytes before keeping it, so what it allocates stays
	// proportional to len(b) (TestDeletionDecodersAllocationBounded).
	if _, err := bm.ReadFrom(bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("lance: deletion bitmap of %d bytes is malformed: %w: %w", len(b), writers.ErrInvalid, err)
	}
	if err := bm.Validate(); err != nil {
		return nil, fmt.Errorf("lance: deletion bitmap of %d bytes is malformed: %w: %w", len(b), writers.ErrInvalid, err)
	}
	// Run containers hold 2^16 rows in 4 bytes: bound the materialised
	// offsets by the fragment, not by b.
	if n := bm.GetCardinality(); n > 0 && (n > rows || uint64(bm.Maximum()) >= rows) {
		return nil, fmt.Errorf("lance: deletion bitmap deletes %d rows up to offset %d of a fragment of %d rows: %w", n, bm.Maximum(), rows, writers.ErrInvalid)
	} else if n > uint64(maxDeletions) {
		return nil, fmt.Errorf("lance: deletion bitmap deletes %d rows of one fragment, more than the %d Quiver reads: compact the dataset with Lance (compact_files), which rewrites the fragment without its deleted rows: %w", n, maxDeletions, writers.ErrInvalid)
	}
	return bm.ToArray(), nil
}

// maxArrowDeletions is where LanceDB switches from .arrow to .bin
// deletion files.
const maxArrowDeletions = 5000

// NewDeletionFile encodes the deleted offsets of a fragment (every deleted
// row, old and new) as LanceDB would: .arrow up to 5000 rows, a roaring
// .bin above. It returns the DeletionFile (a random id, readVersion = the
// version the deletions were computed on) and the file's bytes, to be
// stored under DeletionFile.Path.
func NewDeletionFile(readVersion uint64, offsets []uint32) (*DeletionFile, []byte, error) {
	vs := slices.Clone(offsets)
	if !slices.IsSorted(vs) { // merges pass them sorted: skip the sort
		slices.Sort(vs)
	}
	vs = slices.Compact(vs)
	if len(vs) > maxDeletions { // what no reader here would read back
		return nil, nil, fmt.Errorf("lance: the merge would leave a fragment with %d deleted rows, more than the %d a deletion file may hold: run the endpoint's optimize action (it rewrites fragments without their deleted rows), then replay the transaction: %w", len(vs), maxDeletions, writers.ErrWrongState)
	}
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return nil, nil, err
	}
	// Lance parses the id from the file name as u64; keep it positive in
	// i64 too for readers that use signed integers.
	d := &DeletionFile{ReadVersion: readVersion, ID: binary.LittleEndian.Uint64(idb[:]) >> 1, NumDeletedRows: uint64(len(vs))}
	if len(vs) > maxArrowDeletions {
		d.FileType = DeletionBitmap
		return d, EncodeDeletionBitmap(vs), nil
	}
	raw, err := EncodeDeletionArrow(vs)
	return d, raw, err
}

// maxFooterFields bounds the fields (each reference to a shared table
// counted) checkArrowFooter walks; a deletion file has one.
const maxFooterFields = 1024

// checkArrowFooter walks the schema in the footer of the Arrow IPC file b
// before arrow-go decodes it: arrow-go sizes slices from the counts the
// footer claims (make([]arrow.Field, children), custom metadata) without
// checking them against the bytes, and a count of 2^30 in a few hundred
// bytes ends the process with a fatal out of memory that no recover
// catches. Every vector must fit in the footer's bytes, and the fields
// (nested, shared ones counted each time) must be few. Reads outside the
// footer panic; the caller recovers them.
func checkArrowFooter(b []byte) error {
	const trailer = 10 // i32 footer length, "ARROW1"
	if len(b) < trailer {
		return fmt.Errorf("%d bytes are too short for an Arrow file", len(b))
	}
	n := int64(int32(binary.LittleEndian.Uint32(b[len(b)-trailer:])))
	if n < 4 || n > int64(len(b)-trailer) {
		return fmt.Errorf("footer length %d does not fit the %d-byte file", n, len(b))
	}
	fb := b[len(b)-trailer-int(n) : len(b)-trailer]
	vec := func(t *flatbuffers.Table, slot, elem int) (start flatbuffers.UOffsetT, count int, err error) {
		off := flatbuffers.UOffsetT(t.Offset(flatbuffers.VOffsetT(4 + 2*slot)))
		if off == 0 {
			return 0, 0, nil
		}
		start, count = t.Vector(off), t.VectorLen(off)
		if count < 0 || int64(count)*int64(elem) > int64(len(fb))-int64(start) {
			return 0, 0, fmt.Errorf("a footer vector claims %d elements, more than its %d bytes hold", count, len(fb))
		}
		return start, count, nil
	}
	root := &flatbuffers.Table{Bytes: fb, Pos: flatbuffers.GetUOffsetT(fb)}
	off := flatbuffers.UOffsetT(root.Offset(4 + 2*1)) // schema
	if off == 0 {
		return nil // arrow-go refuses a footer without a schema
	}
	schema := &flatbuffers.Table{Bytes: fb, Pos: root.Indirect(root.Pos + off)}
	if _, _, err := vec(schema, 2, 4); err != nil { // custom_metadata
		return err
	}
	if _, _, err := vec(schema, 3, 8); err != nil { // features
		return err
	}
	walked := 0
	var field func(pos flatbuffers.UOffsetT, depth int) error
	fields := func(t *flatbuffers.Table, slot, depth int) error {
		start, count, err := vec(t, slot, 4)
		if err != nil {
			return err
		}
		for i := range count {
			if err := field(t.Indirect(start+flatbuffers.UOffsetT(4*i)), depth); err != nil {
				return err
			}
		}
		return nil
	}
	field = func(pos flatbuffers.UOffsetT, depth int) error {
		if walked++; walked > maxFooterFields || depth > 64 {
			return fmt.Errorf("the footer schema has more than %d fields or nests deeper than 64", maxFooterFields)
		}
		f := &flatbuffers.Table{Bytes: fb, Pos: pos}
		if _, _, err := vec(f, 6, 4); err != nil { // custom_metadata
			return err
		}
		return fields(f, 5, depth+1) // children
	}
	return fields(schema, 1, 1)
}

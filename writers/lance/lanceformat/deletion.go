package lanceformat

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
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

// DecodeDeletionArrow reads the offsets of an .arrow deletion file
// (ZSTD-compressed IPC bodies, as LanceDB writes them, included).
func DecodeDeletionArrow(b []byte) ([]uint32, error) {
	r, err := ipc.NewFileReader(bytes.NewReader(b), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, fmt.Errorf("lance: deletion file: %w", err)
	}
	defer r.Close()
	if f := r.Schema().Fields(); len(f) != 1 || f[0].Type.ID() != arrow.UINT32 {
		return nil, fmt.Errorf("lance: deletion file schema %s is not row_id: uint32", r.Schema())
	}
	var out []uint32
	for i := range r.NumRecords() {
		rec, err := r.RecordBatch(i)
		if err != nil {
			return nil, fmt.Errorf("lance: deletion file: %w", err)
		}
		out = append(out, rec.Column(0).(*array.Uint32).Uint32Values()...)
	}
	return out, nil
}

// Portable roaring bitmap cookies.
const (
	roaringNoRuns = 12346
	roaringRuns   = 12347
)

// EncodeDeletionBitmap returns a 32-bit roaring bitmap in the portable
// serialization (Lance's BITMAP deletion file), with array and bitmap
// containers only. offsets is not modified; sorted and distinct offsets
// (what merges pass) are encoded without a copy.
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
// bitmap and run containers).
func DecodeDeletionBitmap(b []byte) ([]uint32, error) {
	bad := fmt.Errorf("lance: deletion bitmap is truncated or malformed")
	if len(b) < 8 {
		return nil, bad
	}
	cookie := binary.LittleEndian.Uint32(b)
	var n int
	var runFlags []byte
	p := 4
	switch {
	case cookie == roaringNoRuns:
		n = int(binary.LittleEndian.Uint32(b[4:]))
		p = 8
	case cookie&0xFFFF == roaringRuns:
		n = int(cookie>>16) + 1
		runFlags = b[p:min(len(b), p+(n+7)/8)]
		p += (n + 7) / 8
	default:
		return nil, fmt.Errorf("lance: deletion bitmap has unknown cookie %d", cookie)
	}
	if n > 1<<16 || len(b) < p+4*n {
		return nil, bad
	}
	keys := make([]uint16, n)
	cards := make([]int, n)
	for i := range n {
		keys[i] = binary.LittleEndian.Uint16(b[p+4*i:])
		cards[i] = int(binary.LittleEndian.Uint16(b[p+4*i+2:])) + 1
	}
	p += 4 * n
	if runFlags == nil || n >= 4 {
		p += 4 * n // offsets header; containers follow in order anyway
	}
	total := 0
	for _, c := range cards {
		total += c
	}
	out := make([]uint32, 0, total)
	for i := range n {
		hi := uint32(keys[i]) << 16
		isRun := runFlags != nil && len(runFlags) > i/8 && runFlags[i/8]&(1<<(i%8)) != 0
		switch {
		case isRun:
			if len(b) < p+2 {
				return nil, bad
			}
			runs := int(binary.LittleEndian.Uint16(b[p:]))
			p += 2
			if len(b) < p+4*runs {
				return nil, bad
			}
			for r := range runs {
				start := uint32(binary.LittleEndian.Uint16(b[p+4*r:]))
				length := uint32(binary.LittleEndian.Uint16(b[p+4*r+2:]))
				for v := start; v <= start+length && v <= 0xFFFF; v++ {
					out = append(out, hi|v)
				}
			}
			p += 4 * runs
		case cards[i] > 4096:
			if len(b) < p+8192 {
				return nil, bad
			}
			for v := range 1 << 16 {
				if b[p+v/8]&(1<<(v%8)) != 0 {
					out = append(out, hi|uint32(v))
				}
			}
			p += 8192
		default:
			if len(b) < p+2*cards[i] {
				return nil, bad
			}
			for k := range cards[i] {
				out = append(out, hi|uint32(binary.LittleEndian.Uint16(b[p+2*k:])))
			}
			p += 2 * cards[i]
		}
	}
	return out, nil
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

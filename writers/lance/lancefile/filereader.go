package lancefile

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/lance/lancefile/lanceenc"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/file2pb"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/filepb"
)

// maxMetadataBytes bounds the metadata tail a reader loads, so that a
// corrupt footer cannot make it allocate without limit.
const maxMetadataBytes = 256 << 20

// FileReader reads a Lance data file of format 2.0, 2.1 or 2.2.
type FileReader struct {
	r       io.ReaderAt
	size    uint64
	minor   uint16  // format 2.minor
	Schema  *Schema // the file's own schema (FileDescriptor)
	Rows    uint64
	columns [][]pageRef
}

// OpenFile parses the footer, file descriptor and column metadata of a
// data file of size bytes. Files of format 2.1 or newer are refused with
// ErrInvalid; malformed files are plain errors.
func OpenFile(r io.ReaderAt, size int64) (*FileReader, error) {
	if size < footerLen {
		return nil, fmt.Errorf("lance: data file of %d bytes is too short", size)
	}
	foot := make([]byte, footerLen)
	if _, err := r.ReadAt(foot, size-footerLen); err != nil {
		return nil, fmt.Errorf("lance: read data file footer: %w", err)
	}
	if string(foot[36:]) != Magic {
		return nil, fmt.Errorf("lance: not a Lance data file (no LANC magic)")
	}
	major, minor := binary.LittleEndian.Uint16(foot[32:]), binary.LittleEndian.Uint16(foot[34:])
	fileMinor, err := readableVersion(major, minor)
	if err != nil {
		return nil, err
	}
	metaStart := binary.LittleEndian.Uint64(foot[0:])
	cmoPos := binary.LittleEndian.Uint64(foot[8:])
	gboPos := binary.LittleEndian.Uint64(foot[16:])
	numGB := uint64(binary.LittleEndian.Uint32(foot[24:]))
	numCols := uint64(binary.LittleEndian.Uint32(foot[28:]))
	end := uint64(size) - footerLen
	if numGB < 1 || !Within(gboPos, 16*numGB, end) || !Within(cmoPos, 16*numCols, end) || metaStart > end {
		return nil, fmt.Errorf("lance: data file footer points outside the file")
	}
	// Read from the lowest metadata position to the footer at once.
	start := min(metaStart, cmoPos, gboPos)
	tooLarge := func(start uint64) error {
		if end-start > maxMetadataBytes {
			return fmt.Errorf("lance: data file metadata of %d bytes exceeds the limit of %d", end-start, maxMetadataBytes)
		}
		return nil
	}
	if err := tooLarge(start); err != nil {
		return nil, err
	}
	gbo := make([]byte, 16)
	if _, err := r.ReadAt(gbo, int64(gboPos)); err != nil {
		return nil, fmt.Errorf("lance: read data file: %w", err)
	}
	gbPos, gbLen := binary.LittleEndian.Uint64(gbo), binary.LittleEndian.Uint64(gbo[8:])
	if !Within(gbPos, gbLen, end) || gbLen > maxMetadataBytes {
		return nil, fmt.Errorf("lance: file descriptor outside the file")
	}
	start = min(start, gbPos)
	if err := tooLarge(start); err != nil {
		return nil, err
	}
	tail := make([]byte, end-start)
	if _, err := r.ReadAt(tail, int64(start)); err != nil {
		return nil, fmt.Errorf("lance: read data file metadata: %w", err)
	}
	at := func(pos, n uint64) []byte { return tail[pos-start : pos-start+n] }

	f := &FileReader{r: r, size: uint64(size), minor: fileMinor, Schema: &Schema{}}
	if err := f.decodeDescriptor(at(gbPos, gbLen)); err != nil {
		return nil, err
	}
	cmo := at(cmoPos, 16*numCols)
	for c := range numCols {
		pos, n := binary.LittleEndian.Uint64(cmo[16*c:]), binary.LittleEndian.Uint64(cmo[16*c+8:])
		if pos < start || !Within(pos, n, end) {
			return nil, fmt.Errorf("lance: column %d metadata outside the file", c)
		}
		pages, err := decodeColumnMetadata(at(pos, n))
		if err != nil {
			return nil, fmt.Errorf("lance: column %d metadata: %w", c, err)
		}
		f.columns = append(f.columns, pages)
	}
	return f, nil
}

func (f *FileReader) decodeDescriptor(b []byte) error {
	fd := &filepb.FileDescriptor{}
	if err := Unmarshal(b, fd); err != nil {
		return fmt.Errorf("lance: file descriptor: %w", err)
	}
	schema, err := SchemaOf(fd.GetSchema().GetFields(), fd.GetSchema().GetMetadata())
	if err != nil {
		return err
	}
	*f.Schema = schema
	f.Rows = fd.Length
	return nil
}

func decodeColumnMetadata(b []byte) ([]pageRef, error) {
	cm := &file2pb.ColumnMetadata{}
	if err := Unmarshal(b, cm); err != nil {
		return nil, err
	}
	pages := make([]pageRef, 0, len(cm.Pages))
	for _, pm := range cm.Pages {
		p := pageRef{offsets: pm.BufferOffsets, sizes: pm.BufferSizes, length: pm.Length}
		if pm.Encoding != nil {
			if err := p.decodeEncoding(pm.Encoding); err != nil {
				return nil, err
			}
		}
		if p.length > lanceenc.MaxPageRows {
			return nil, fmt.Errorf("page of %d rows exceeds the reader's limit of %d", p.length, lanceenc.MaxPageRows)
		}
		if len(p.offsets) != len(p.sizes) || (p.enc == nil && p.layout == nil) {
			return nil, fmt.Errorf("page without encoding or with %d offsets for %d sizes", len(p.offsets), len(p.sizes))
		}
		pages = append(pages, p)
	}
	return pages, nil
}

// Within reports whether [pos, pos+n) lies in [0, end), without
// overflowing on hostile values.
func Within(pos, n, end uint64) bool { return n <= end && pos <= end-n }

// buffers reads a page's buffers, charging them to bud.
func (f *FileReader) buffers(bud *lanceenc.Budget, p pageRef) ([][]byte, error) {
	out := make([][]byte, len(p.offsets))
	for i, off := range p.offsets {
		n := p.sizes[i]
		if !Within(off, n, f.size) {
			return nil, fmt.Errorf("lance: page buffer at %d (%d bytes) is outside the file", off, n)
		}
		if err := bud.SpendBuffers(n); err != nil {
			return nil, fmt.Errorf("lance: page buffer at %d (%d bytes): %w", off, n, err)
		}
		out[i] = make([]byte, n)
		if _, err := f.r.ReadAt(out[i], int64(off)); err != nil {
			return nil, fmt.Errorf("lance: read page buffer: %w", err)
		}
	}
	return out, nil
}

// Read reads the whole file as records of the file's schema (one, unless
// a dictionary column's pages cannot share one dictionary: see chunks.go),
// allocated from mem (the caller releases them).
func (f *FileReader) Read(mem memory.Allocator) ([]arrow.RecordBatch, error) {
	return f.ReadFields(mem, f.Schema, nil)
}

// ReadFields reads the top-level fields of schema s (a dataset schema
// whose field ids the file holds) as records (see Read). columnOf maps a
// top-level field id to its column in the file; nil means columns follow
// the file's own schema in pre-order.
func (f *FileReader) ReadFields(mem memory.Allocator, s *Schema, columnOf map[int32]int) ([]arrow.RecordBatch, error) {
	as, err := s.ToArrow()
	if err != nil {
		return nil, err
	}
	if columnOf == nil {
		columnOf = make(map[int32]int)
		for i, fl := range f.Schema.Fields {
			columnOf[fl.ID] = i
		}
		if f.minor > 0 { // one column per leaf field
			for i, id := range leafFields(f.Schema) {
				columnOf[id] = i
			}
		}
	}
	top := s.TopLevel()
	bud := lanceenc.NewBudget(f.size)
	if f.minor > 0 {
		return f.readFields21(mem, bud, s, as, columnOf)
	}
	cols := make([]arrow.Array, 0, len(top))
	defer func() { lanceenc.ReleaseAll(cols) }()
	for i, fl := range top {
		c, ok := columnOf[fl.ID]
		if !ok {
			return nil, fmt.Errorf("lance: data file has no column for field %q (id %d)", fl.Name, fl.ID)
		}
		arr, _, err := f.readColumn(mem, bud, as.Field(i).Type, c)
		if err != nil {
			return nil, fmt.Errorf("lance: column %q: %w", fl.Name, err)
		}
		if n := arr.Len(); uint64(n) != f.Rows {
			arr.Release()
			return nil, fmt.Errorf("lance: column %q has %d rows, the file %d", fl.Name, n, f.Rows)
		}
		cols = append(cols, arr)
	}
	return []arrow.RecordBatch{array.NewRecordBatch(as, cols, int64(f.Rows))}, nil
}

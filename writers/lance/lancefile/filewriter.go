package lancefile

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/util"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile/lanceenc"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodingspb"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/file2pb"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/filepb"
)

// Format 2.0 as written in data file footers (LanceDB writes 0.3 there and
// 2/0 in the manifest's DataFile).
const (
	footerMajor20 = 0
	footerMinor20 = 3
	footerLen     = 40
	pageAlign     = 64
)

// Magic ends every Lance data file and manifest file.
const Magic = "LANC"

// DefaultPageBytes is the Arrow size at which a FileWriter cuts a page
// (LanceDB cuts around 8 MiB too).
const DefaultPageBytes = 8 << 20

// FileWriter streams one Lance data file (format 2.0, 2.1 or 2.2) to an io.Writer: rows are
// buffered until about PageBytes of Arrow data are pending, then written
// as one page per column; Close writes the metadata and footer. It is not
// safe for concurrent use.
type FileWriter struct {
	out       io.Writer
	pos       uint64
	schema    *Schema
	arrow     *arrow.Schema
	pageBytes int64
	minor     uint16 // format 2.minor

	pending      []arrow.RecordBatch // retained; released by flush
	pendingBytes int64
	// A page's first dictionary per column (in pendingDicts, the last
	// seen) is held in pendingDictBytes: it does not bring the page's
	// flush nearer, as flushing early would only repeat it. Other ones
	// count in pendingBytes, as they grow the page's union.
	pendingDicts     map[int]arrow.ArrayData
	pendingDictBytes int64
	dicts            map[int]*fileDict // per narrow dictionary column
	rows             uint64
	columns          [][]pageRef            // per column, in order
	fieldStates      []*lanceenc.FieldState // per top-level field (2.1, 2.2)
	closed           bool
}

// pageRef is a written page: where its buffers are and how it is encoded.
type pageRef struct {
	offsets, sizes []uint64
	length         uint64
	enc            *aenc                     // format 2.0
	layout         *encodings21pb.PageLayout // formats 2.1 and 2.2
}

// NewFileWriter returns a writer of records of schema s in file format
// 2.minor (0, 1 or 2), whose Lance fields (ids) are given by ls
// (FromArrow(s) for a new dataset, the dataset's schema otherwise).
// pageBytes <= 0 means DefaultPageBytes.
func NewFileWriter(out io.Writer, s *arrow.Schema, ls *Schema, pageBytes int64, minor uint16) (*FileWriter, error) {
	if pageBytes <= 0 {
		pageBytes = DefaultPageBytes
	}
	probe, err := FromArrow(s)
	if err != nil {
		return nil, err
	}
	if len(probe.Fields) != len(ls.Fields) {
		return nil, writers.Errorf(writers.ErrInvalid, "lance: the records have %d fields (nested included), the dataset %d", len(probe.Fields), len(ls.Fields))
	}
	if minor > 2 {
		return nil, fmt.Errorf("lance: file format 2.%d is not written by Quiver", minor)
	}
	cols := len(ls.Fields)
	if minor > 0 {
		cols = len(leafFields(ls))
	}
	states := make([]*lanceenc.FieldState, s.NumFields())
	for i := range states {
		states[i] = new(lanceenc.FieldState)
	}
	return &FileWriter{out: out, schema: ls, arrow: s, pageBytes: pageBytes, minor: minor, columns: make([][]pageRef, cols), fieldStates: states}, nil
}

// Write buffers rec (borrowed: retained while pending). Its schema must be
// the writer's. A record larger than a page is written out whole before
// Write returns: a slice of it left pending would keep all of its buffers.
func (w *FileWriter) Write(rec arrow.RecordBatch) error {
	if !rec.Schema().Equal(w.arrow) {
		return writers.Errorf(writers.ErrInvalid, "lance: record schema %s differs from the file's %s", rec.Schema(), w.arrow)
	}
	if err := checkDictionaries(rec); err != nil {
		return err
	}
	w.fileDicts(rec, (*fileDict).add)
	size := pageSize(rec)
	rows := rec.NumRows()
	// Large records are cut so that no page grows far past pageBytes.
	parts := max(1, size/w.pageBytes)
	step := max(1, (rows+parts-1)/parts)
	for start := int64(0); start < rows; start += step {
		part := rec.NewSlice(start, min(rows, start+step))
		w.pending = append(w.pending, part)
		w.pendingBytes += size * (part.NumRows()) / max(1, rows)
		if w.pendingBytes >= w.pageBytes {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	w.rows += uint64(rows)
	// Counted after the rows, so that a dictionary does not cut them.
	first, more := w.newDictBytes(rec)
	w.pendingDictBytes += first
	w.pendingBytes += more
	if parts > 1 || w.pendingBytes >= w.pageBytes {
		return w.flush()
	}
	return nil
}

// checkDictionaries refuses a dictionary column whose dictionary has
// more entries than its index type addresses: Lance's readers cannot
// take such a page, and pages of other records could not share it.
func checkDictionaries(rec arrow.RecordBatch) error {
	for i, c := range rec.Columns() {
		d, ok := c.(*array.Dictionary)
		if !ok {
			continue
		}
		idx := d.DataType().(*arrow.DictionaryType).IndexType
		if n := d.Dictionary().Len(); n > lanceenc.Addressable(idx) {
			return writers.Errorf(writers.ErrInvalid, "lance: column %q has a dictionary of %d entries, more than its %s indices address (%d): send it with wider indices (int16 or int32)",
				rec.ColumnName(i), n, idx, lanceenc.Addressable(idx))
		}
	}
	return nil
}

// newDictBytes is the Arrow bytes of rec's dictionaries that are the
// pending page's first of their column, and of those that differ from the
// last one seen, which it records.
func (w *FileWriter) newDictBytes(rec arrow.RecordBatch) (first, more int64) {
	for i, c := range rec.Columns() {
		d, ok := c.(*array.Dictionary)
		if !ok || len(w.pending) == 0 {
			continue
		}
		if w.pendingDicts == nil {
			w.pendingDicts = map[int]arrow.ArrayData{}
		}
		last, seen := w.pendingDicts[i]
		if dd := d.Data().Dictionary(); last != dd {
			w.pendingDicts[i] = dd
			if seen {
				more += util.TotalArraySize(d.Dictionary())
			} else {
				first += util.TotalArraySize(d.Dictionary())
			}
		}
	}
	return first, more
}

// pageSize is rec's Arrow bytes as they weigh on a page: dictionaries
// are left out, as a page stores one for all its chunks (counting it
// would cut a record of a large dictionary into slices, each page then
// with a copy).
func pageSize(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		if d, ok := c.(*array.Dictionary); ok {
			c = d.Indices()
		}
		n += util.TotalArraySize(c)
	}
	return n
}

// FieldColumns returns, for each field of the file's schema, its column
// in the file, or -1 when it has none (structs and lists in format 2.1+,
// whose fields the manifest's data file then leaves out: see
// DataFileFields).
func (w *FileWriter) FieldColumns() []int32 {
	out := make([]int32, len(w.schema.Fields))
	if w.minor == 0 {
		for i := range out {
			out[i] = int32(i)
		}
		return out
	}
	leaves := leafFields(w.schema)
	for i, f := range w.schema.Fields {
		out[i] = -1
		for c, id := range leaves {
			if id == f.ID {
				out[i] = int32(c)
			}
		}
	}
	return out
}

// Pending is the memory the writer holds: the Arrow bytes of the rows (and
// dictionaries) buffered for the next page, and the distinct dictionary
// values of the file it tracks (FitsDictionaries).
func (w *FileWriter) Pending() int64 { return w.pendingBytes + w.pendingDictBytes + w.dictBytes() }

// Flush writes the pending rows out as a page now (under memory pressure)
// instead of at PageBytes.
func (w *FileWriter) Flush() error { return w.flush() }

// Rows is the number of rows written so far.
func (w *FileWriter) Rows() uint64 { return w.rows }

// BytesWritten is the number of bytes written to out so far.
func (w *FileWriter) BytesWritten() uint64 { return w.pos }

// Abort releases pending records without writing anything more.
func (w *FileWriter) Abort() {
	for _, r := range w.pending {
		r.Release()
	}
	w.pending, w.closed = nil, true
}

// flush writes the pending records as one page per column.
func (w *FileWriter) flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	defer func() {
		for _, r := range w.pending {
			r.Release()
		}
		w.pending, w.pendingBytes, w.pendingDicts, w.pendingDictBytes = nil, 0, nil, 0
	}()
	if w.minor > 0 {
		return w.flush21()
	}
	col := 0
	for i, f := range w.arrow.Fields() {
		var err error
		if col, err = encodeColumns(f.Type, w.chunks(i), col, w.writePage); err != nil {
			return err
		}
	}
	return nil
}

// chunks returns field i of the pending records.
func (w *FileWriter) chunks(i int) []arrow.Array {
	chunks := make([]arrow.Array, len(w.pending))
	for j, r := range w.pending {
		chunks[j] = r.Column(i)
	}
	return chunks
}

// flush21 encodes the pending records' fields (2.1, 2.2) on up to
// GOMAXPROCS goroutines, as Lance's writer encodes columns in parallel: a
// stream writes one file at a time, in its rows' order, so its columns
// are what can share the cores. Each field's pages are held until the
// fields before it are written, so the file is laid out as if encoded one
// field after the other.
func (w *FileWriter) flush21() error {
	type page struct {
		col int // relative to the field's first column
		p   lanceenc.Page
	}
	fields := w.arrow.Fields()
	pages := make([][]page, len(fields))
	cols := make([]int, len(fields))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, f := range fields {
		g.Go(func() error {
			n, err := lanceenc.EncodeField(f.Type, w.chunks(i), leafCount(f.Type), 0, w.minor, w.fieldStates[i], func(col int, p lanceenc.Page) error {
				pages[i] = append(pages[i], page{col, p})
				return nil
			})
			cols[i] = n
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	base := 0
	for i := range fields {
		for _, p := range pages[i] {
			err := w.writePage21(base+p.col, p.p)
			p.p.Recycle() // on an error, the pages not written go to the collector
			if err != nil {
				return err
			}
		}
		base += cols[i]
	}
	return nil
}

// writePage21 writes a page of format 2.1 or 2.2 into column col.
func (w *FileWriter) writePage21(col int, p lanceenc.Page) error {
	return w.writePage(col, page{bufs: p.Bufs, length: p.Length, layout: p.Layout})
}

func (w *FileWriter) writePage(col int, p page) error {
	ref := pageRef{length: p.length, enc: p.enc, layout: p.layout}
	for _, b := range p.bufs {
		off, err := w.writeAligned(b)
		if err != nil {
			return err
		}
		ref.offsets = append(ref.offsets, off)
		ref.sizes = append(ref.sizes, uint64(len(b)))
	}
	w.columns[col] = append(w.columns[col], ref)
	return nil
}

var zeros [pageAlign]byte

// writeAligned writes b and pads to the next 64-byte boundary.
func (w *FileWriter) writeAligned(b []byte) (uint64, error) {
	off := w.pos
	if err := w.write(b); err != nil {
		return 0, err
	}
	if pad := (pageAlign - w.pos%pageAlign) % pageAlign; pad > 0 {
		return off, w.write(zeros[:pad])
	}
	return off, nil
}

func (w *FileWriter) write(b []byte) error {
	n, err := w.out.Write(b)
	w.pos += uint64(n)
	if err != nil {
		return fmt.Errorf("lance: write data file: %w", err)
	}
	return nil
}

// Close flushes pending rows and writes the file descriptor, column
// metadata and footer. It does not close out. It returns the file's size.
func (w *FileWriter) Close() (uint64, error) {
	if w.closed {
		return 0, fmt.Errorf("lance: file writer already closed")
	}
	if err := w.flush(); err != nil {
		w.Abort()
		return 0, err
	}
	w.closed = true
	fd, err := Marshal(&filepb.FileDescriptor{Schema: &filepb.Schema{Fields: w.schema.ToPB(), Metadata: w.schema.Metadata}, Length: w.rows})
	if err != nil {
		w.Abort()
		return 0, err
	}

	var tail []byte
	gbPos := w.pos
	tail = append(tail, fd...)
	metaStart := gbPos + uint64(len(fd))
	var cmo []byte
	for _, pages := range w.columns {
		m, err := columnMetadata(pages)
		if err != nil {
			w.Abort()
			return 0, err
		}
		cmo = binary.LittleEndian.AppendUint64(cmo, metaStart+uint64(len(tail))-uint64(len(fd)))
		cmo = binary.LittleEndian.AppendUint64(cmo, uint64(len(m)))
		tail = append(tail, m...)
	}
	cmoPos := gbPos + uint64(len(tail))
	tail = append(tail, cmo...)
	gboPos := gbPos + uint64(len(tail))
	tail = binary.LittleEndian.AppendUint64(tail, gbPos)
	tail = binary.LittleEndian.AppendUint64(tail, uint64(len(fd)))
	tail = binary.LittleEndian.AppendUint64(tail, metaStart)
	tail = binary.LittleEndian.AppendUint64(tail, cmoPos)
	tail = binary.LittleEndian.AppendUint64(tail, gboPos)
	tail = binary.LittleEndian.AppendUint32(tail, 1)
	tail = binary.LittleEndian.AppendUint32(tail, uint32(len(w.columns)))
	if w.minor == 0 {
		tail = binary.LittleEndian.AppendUint16(tail, footerMajor20)
		tail = binary.LittleEndian.AppendUint16(tail, footerMinor20)
	} else {
		tail = binary.LittleEndian.AppendUint16(tail, 2)
		tail = binary.LittleEndian.AppendUint16(tail, w.minor)
	}
	tail = append(tail, Magic...)
	if err := w.write(tail); err != nil {
		return 0, err
	}
	return w.pos, nil
}

// directEncoding is lance.file.v2.Encoding{direct: a google.protobuf.Any
// of typeURL holding msg}. A variable so that a test can make it fail:
// with the constant type URLs it cannot.
var directEncoding = func(typeURL string, msg []byte) (*file2pb.Encoding, error) {
	a, err := Marshal(&anypb.Any{TypeUrl: typeURL, Value: msg})
	if err != nil {
		return nil, err
	}
	return &file2pb.Encoding{Location: &file2pb.Encoding_Direct{Direct: &file2pb.DirectEncoding{Encoding: a}}}, nil
}

const (
	typeColumnEncoding = "/lance.encodings.ColumnEncoding"
	typeArrayEncoding  = "/lance.encodings.ArrayEncoding"
)

// columnMetadata is lance.file.v2.ColumnMetadata of one column.
func columnMetadata(pages []pageRef) ([]byte, error) {
	colEnc, err := Marshal(&encodingspb.ColumnEncoding{ColumnEncoding: &encodingspb.ColumnEncoding_Values{Values: &emptypb.Empty{}}})
	if err != nil {
		return nil, err
	}
	cm := &file2pb.ColumnMetadata{}
	if cm.Encoding, err = directEncoding(typeColumnEncoding, colEnc); err != nil {
		return nil, err
	}
	for _, p := range pages {
		var typeURL string
		var enc []byte
		if p.layout != nil {
			typeURL = typePageLayout
			enc, err = Marshal(p.layout)
		} else {
			typeURL = typeArrayEncoding
			enc, err = p.enc.encode()
		}
		if err != nil {
			return nil, err
		}
		pe, err := directEncoding(typeURL, enc)
		if err != nil {
			return nil, err
		}
		cm.Pages = append(cm.Pages, &file2pb.ColumnMetadata_Page{BufferOffsets: p.offsets, BufferSizes: p.sizes, Length: p.length, Encoding: pe})
	}
	return Marshal(cm)
}

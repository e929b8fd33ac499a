package lancefile

import (
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiver-ingest/quiver/writers/lance/lancefile/lanceenc"
)

// Lance's readers (pylance 14) join the pages of a data file that a batch
// spans, dictionaries included, and fail ("Dictionary key bigger than the
// key type") when their union outgrows the index type. So the distinct
// dictionary values of a file's column must fit its index type: the
// sink rolls a new data file before a record that would overflow them
// (FitsDictionaries). Quiver's own reader takes such files too (it reads
// them as several records: chunks.go).

// fileDict is the distinct dictionary values written into one column of a
// file, for index types of 8 and 16 bits (wider ones address any
// dictionary a data file can hold).
type fileDict struct {
	last  arrow.ArrayData     // the last dictionary added
	seen  map[string]struct{} // copies: a string value's key is a view of its buffer
	limit int
	bytes int64 // held by seen, counted in the writer's Pending
}

// seenEntryBytes is a map entry's memory besides its key's bytes (string
// header, bucket slot and overhead).
const seenEntryBytes = 48

// fresh is the number of d's values the file's column does not hold yet.
func (u *fileDict) fresh(d arrow.Array) int {
	if d.Data() == u.last {
		return 0
	}
	n := 0
	for j := range d.Len() {
		if _, ok := u.seen[valueKey(d, j)]; !ok {
			n++
		}
	}
	return n
}

func (u *fileDict) add(d arrow.Array) {
	if d.Data() == u.last {
		return
	}
	for j := range d.Len() {
		k := valueKey(d, j)
		if _, ok := u.seen[k]; !ok {
			u.seen[strings.Clone(k)] = struct{}{}
			u.bytes += int64(len(k)) + seenEntryBytes
		}
	}
	u.last = d.Data()
}

// fileDicts returns the trackers of rec's narrow dictionary columns,
// creating them.
func (w *FileWriter) fileDicts(rec arrow.RecordBatch, each func(u *fileDict, d arrow.Array)) {
	for i, c := range rec.Columns() {
		d, ok := c.(*array.Dictionary)
		if !ok {
			continue
		}
		idx := d.DataType().(*arrow.DictionaryType).IndexType
		if idx.(arrow.FixedWidthDataType).BitWidth() > 16 {
			continue
		}
		if w.dicts == nil {
			w.dicts = map[int]*fileDict{}
		}
		u := w.dicts[i]
		if u == nil {
			u = &fileDict{seen: map[string]struct{}{}, limit: lanceenc.Addressable(idx)}
			w.dicts[i] = u
		}
		each(u, d.Dictionary())
	}
}

// dictBytes is the memory of the distinct values the trackers hold.
func (w *FileWriter) dictBytes() int64 {
	var n int64
	for _, u := range w.dicts {
		n += u.bytes
	}
	return n
}

// FitsDictionaries reports whether rec's dictionary columns, with what
// the file holds already, keep within their index types (always true for
// an empty file: a record's own dictionary is checked by Write).
func (w *FileWriter) FitsDictionaries(rec arrow.RecordBatch) bool {
	if w.rows == 0 {
		return true
	}
	fits := true
	w.fileDicts(rec, func(u *fileDict, d arrow.Array) {
		fits = fits && len(u.seen)+u.fresh(d) <= u.limit
	})
	return fits
}

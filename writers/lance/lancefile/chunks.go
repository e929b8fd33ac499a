package lancefile

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/lance/lancefile/lanceenc"
)

// Reading a column as several chunks. In format 2.1+ every page of a
// dictionary column carries its own dictionary; the pages of one file
// (Quiver's, when a stream changed dictionaries, or another writer's) may
// hold more distinct values than the index type addresses (int8: 128),
// even a single page (pylance 14 unifies batches' dictionaries into one
// page of wider indices). So a dictionary column is read as its values,
// cut into runs of rows of at most that many distinct values, each
// dictionary-encoded on its own, and a file or fragment as several
// records cut where any of its columns' chunks end.

// joinPages joins the pages of one leaf column: one array of type dt, or
// for a dictionary type, whose pages hold its values, the chunks of
// dictChunks. The pages are released.
func joinPages(mem memory.Allocator, dt arrow.DataType, pages []arrow.Array) ([]arrow.Array, error) {
	defer lanceenc.ReleaseAll(pages)
	t, dict := dt.(*arrow.DictionaryType)
	vt := dt
	if dict {
		vt = t.ValueType
	}
	var all arrow.Array
	switch len(pages) {
	case 0:
		all = array.MakeArrayOfNull(mem, vt, 0)
	case 1:
		all = pages[0]
		all.Retain()
	default:
		var err error
		if all, err = array.Concatenate(pages, mem); err != nil {
			return nil, err
		}
	}
	if !dict {
		return []arrow.Array{all}, nil
	}
	defer all.Release()
	return dictChunks(mem, t, all)
}

// dictChunks dictionary-encodes values as type t: one array, or one per
// run of rows whose distinct values the index type addresses.
func dictChunks(mem memory.Allocator, t *arrow.DictionaryType, values arrow.Array) ([]arrow.Array, error) {
	limit, cuts := lanceenc.Addressable(t.IndexType), []int{0}
	if t.IndexType.(arrow.FixedWidthDataType).BitWidth() <= 16 {
		seen := map[string]struct{}{}
		for i := range values.Len() {
			if values.IsNull(i) {
				continue
			}
			k := valueKey(values, i)
			if _, ok := seen[k]; ok {
				continue
			}
			if len(seen) == limit {
				cuts, seen = append(cuts, i), map[string]struct{}{}
			}
			seen[k] = struct{}{}
		}
	}
	cuts = append(cuts, values.Len())
	var out []arrow.Array
	for j := range len(cuts) - 1 {
		d, err := lanceenc.DictEncode(mem, t, array.NewSlice(values, int64(cuts[j]), int64(cuts[j+1])))
		if err != nil {
			lanceenc.ReleaseAll(out)
			return nil, err
		}
		out = append(out, array.MakeFromData(d))
		d.Release()
	}
	return out, nil
}

// valueKey is value j of a binary or fixed-width array as bytes (values
// Arrow takes as equal have equal bytes).
func valueKey(a arrow.Array, j int) string {
	switch d := a.(type) {
	case *array.String:
		return d.Value(j)
	case *array.LargeString:
		return d.Value(j)
	case *array.Binary:
		return string(d.Value(j))
	case *array.LargeBinary:
		return string(d.Value(j))
	}
	data := a.Data()
	w := data.DataType().(arrow.FixedWidthDataType).BitWidth() / 8
	at := (data.Offset() + j) * w
	return string(data.Buffers()[1].Bytes()[at : at+w])
}

// Records cuts columns of chunks (each column's chunks adding up to rows)
// into records of schema s, one per run of rows no chunk boundary
// crosses. The chunks are released.
func Records(s *arrow.Schema, cols [][]arrow.Array, rows int64) ([]arrow.RecordBatch, error) {
	defer func() {
		for _, c := range cols {
			lanceenc.ReleaseAll(c)
		}
	}()
	var ends []int64
	for i, c := range cols {
		var n int64
		for _, a := range c {
			n += int64(a.Len())
			ends = append(ends, n)
		}
		if n != rows {
			return nil, fmt.Errorf("lance: column %q has %d rows, the others %d", s.Field(i).Name, n, rows)
		}
	}
	slices.Sort(ends)
	ends = slices.Compact(append(ends, rows))
	var out []arrow.RecordBatch
	next := make([]int, len(cols))    // each column's chunk holding row from
	start := make([]int64, len(cols)) // that chunk's first row
	from := int64(0)
	for _, to := range ends {
		if to == from && rows > 0 {
			continue
		}
		part := make([]arrow.Array, len(cols))
		for i, c := range cols {
			for next[i] < len(c)-1 && start[i]+int64(c[next[i]].Len()) <= from {
				start[i] += int64(c[next[i]].Len())
				next[i]++
			}
			part[i] = array.NewSlice(c[next[i]], from-start[i], to-start[i])
		}
		out = append(out, array.NewRecordBatch(s, part, to-from))
		lanceenc.ReleaseAll(part)
		from = to
	}
	return out, nil
}

// ReleaseRecords releases every record of recs.
func ReleaseRecords(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// Rows is the number of rows of recs.
func Rows(recs []arrow.RecordBatch) int64 {
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	return n
}

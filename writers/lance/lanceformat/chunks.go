package lanceformat

import (
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Reading a column as several chunks. In format 2.1+ every page of a
// dictionary column carries its own dictionary; the pages of one file
// (Quiver's, when a stream changed dictionaries, or another writer's) may
// hold more distinct values together than the index type addresses
// (int8: 127), so such a column reads as several arrays, each joining the
// pages whose dictionaries' union fits, and a file or fragment as several
// records cut where any of its columns' chunks end.

// joinPages joins the pages of one leaf column (each of type dt): one
// array, or for a dictionary the runs of pages whose union fits the index
// type. The pages are released.
func joinPages(mem memory.Allocator, dt arrow.DataType, pages []arrow.Array) ([]arrow.Array, error) {
	defer releaseAll(pages)
	if len(pages) == 0 {
		return []arrow.Array{array.MakeArrayOfNull(mem, dt, 0)}, nil
	}
	runs := [][]arrow.Array{pages}
	if t, ok := dt.(*arrow.DictionaryType); ok {
		runs = dictRuns(pages, maxDictEntries(t.IndexType))
	}
	var out []arrow.Array
	for _, run := range runs {
		if len(run) == 1 {
			run[0].Retain()
			out = append(out, run[0])
			continue
		}
		a, err := array.Concatenate(run, mem)
		if err != nil {
			releaseAll(out)
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// maxDictEntries is the number of dictionary entries Arrow lets an index
// type address when it unifies dictionaries.
func maxDictEntries(idx arrow.DataType) int {
	switch idx.ID() {
	case arrow.INT8:
		return math.MaxInt8
	case arrow.UINT8:
		return math.MaxUint8
	case arrow.INT16:
		return math.MaxInt16
	case arrow.UINT16:
		return math.MaxUint16
	case arrow.INT32:
		return math.MaxInt32
	}
	return math.MaxInt
}

// dictRuns cuts dictionary pages into runs of consecutive pages whose
// dictionaries hold at most limit distinct values together. A page's
// dictionary holds distinct values (the reader built it), counted by
// their bytes: values Arrow's unifier takes as one are at least as many.
// A page alone over the limit cannot be: its indices would not fit.
func dictRuns(pages []arrow.Array, limit int) [][]arrow.Array {
	var (
		runs [][]arrow.Array
		seen = map[string]struct{}{}
		from int
	)
	for i, p := range pages {
		dict := p.(*array.Dictionary).Dictionary()
		fresh := 0
		for j := range dict.Len() {
			if _, ok := seen[dictKey(dict, j)]; !ok {
				fresh++
			}
		}
		if len(seen)+fresh > limit && i > from {
			runs = append(runs, pages[from:i])
			from, seen = i, map[string]struct{}{}
		}
		for j := range dict.Len() {
			seen[dictKey(dict, j)] = struct{}{}
		}
	}
	return append(runs, pages[from:])
}

// dictKey is value j of a dictionary as bytes.
func dictKey(dict arrow.Array, j int) string {
	switch d := dict.(type) {
	case *array.String:
		return d.Value(j)
	case *array.LargeString:
		return d.Value(j)
	case *array.Binary:
		return string(d.Value(j))
	case *array.LargeBinary:
		return string(d.Value(j))
	}
	data := dict.Data()
	w := data.DataType().(arrow.FixedWidthDataType).BitWidth() / 8
	at := (data.Offset() + j) * w
	return string(data.Buffers()[1].Bytes()[at : at+w])
}

// records cuts columns of chunks (each column's chunks adding up to rows)
// into records of schema s, one per run of rows no chunk boundary
// crosses. The chunks are released.
func records(s *arrow.Schema, cols [][]arrow.Array, rows int64) ([]arrow.RecordBatch, error) {
	defer func() {
		for _, c := range cols {
			releaseAll(c)
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
		releaseAll(part)
		from = to
	}
	return out, nil
}

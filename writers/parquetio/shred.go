package parquetio

import (
	"bytes"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/parquet-go/parquet-go"

	"github.com/quiver-ingest/quiver/writers"
)

// slot is one position while shredding nested data (Dremel): the element
// idx of the current node's array, or idx < 0 when the value ended higher
// up (a null or an empty list) at definition level def.
type slot struct {
	idx int
	rep uint8
	def uint8
}

// shred fills the value buffers of n's leaves with rows [lo, hi) of arr,
// n's column of a record. Top-level primitive columns, the hot path, are
// converted in one loop; nested columns go through slots.
func (n *node) shred(arr arrow.Array, lo, hi int, roots []slot) ([]slot, error) {
	if err := n.checkNulls(arr); err != nil {
		return roots, err
	}
	if n.kind == leafNode {
		n.leaf.shredRange(arr, lo, hi)
		return roots, nil
	}
	roots = roots[:0]
	for i := lo; i < hi; i++ {
		roots = append(roots, slot{idx: i})
	}
	return roots, n.descend(arr, roots)
}

// checkNulls refuses nulls in a field declared non-nullable: Parquet has
// no way to store them in a required column.
func (n *node) checkNulls(arr arrow.Array) error {
	if !n.nullable && arr.NullN() > 0 {
		return writers.Errorf(writers.ErrInvalid, "parquetio: column %q is declared non-nullable but holds %d nulls: mark the field nullable or fill the nulls", strings.Join(n.path, "."), arr.NullN())
	}
	return nil
}

// descend shreds the positions in of arr (n's array) into n's leaves. in
// is read only: siblings share it.
func (n *node) descend(arr arrow.Array, in []slot) error {
	present := in
	if !n.nullable && arr.NullN() > 0 {
		// Arrow may hold nulls under a null parent even in a
		// non-nullable field; only nulls that would be stored count.
		for _, s := range in {
			if s.idx >= 0 && arr.IsNull(s.idx) {
				return n.checkNulls(arr)
			}
		}
	}
	if n.nullable {
		present = n.slots[:0]
		hasNulls := arr.NullN() > 0
		for _, s := range in {
			if s.idx >= 0 {
				if hasNulls && arr.IsNull(s.idx) {
					s.idx = -1
				} else {
					s.def++
				}
			}
			present = append(present, s)
		}
		n.slots = present
	}
	switch n.kind {
	case leafNode:
		n.leaf.shredSlots(arr, present)
	case structNode:
		st := arr.(*array.Struct)
		for k, c := range n.children {
			if err := c.descend(st.Field(k), present); err != nil {
				return err
			}
		}
	case listNode, mapNode:
		elems := n.expand(arr.(array.ListLike), present)
		if n.kind == listNode {
			return n.children[0].descend(arr.(array.ListLike).ListValues(), elems)
		}
		m := arr.(*array.Map)
		if err := n.children[0].descend(m.Keys(), elems); err != nil {
			return err
		}
		return n.children[1].descend(m.Items(), elems)
	}
	return nil
}

// expand replaces each present list by its elements: the first keeps the
// list's repetition level, the others repeat at n's level. An empty list
// ends at n's present definition level. The result lives in a buffer of
// n's first child, which nothing else writes.
func (n *node) expand(ll array.ListLike, present []slot) []slot {
	holder := n.children[0]
	elems := holder.elems[:0]
	for _, s := range present {
		if s.idx < 0 {
			elems = append(elems, s)
			continue
		}
		start, end := ll.ValueOffsets(s.idx)
		if start == end {
			elems = append(elems, slot{idx: -1, rep: s.rep, def: s.def})
			continue
		}
		for j := start; j < end; j++ {
			rep := n.repLevel
			if j == start {
				rep = s.rep
			}
			elems = append(elems, slot{idx: int(j), rep: rep, def: s.def + 1})
		}
	}
	holder.elems = elems
	return elems
}

// keepScratch drops the shredding buffers of n and its descendants that
// hold more than limit entries, so that one large batch or list does not
// pin memory for the rest of the file.
func (n *node) keepScratch(limit int) {
	if cap(n.slots) > limit {
		n.slots = nil
	}
	if cap(n.elems) > limit {
		n.elems = nil
	}
	if l := n.leaf; l != nil {
		if cap(l.vals) > limit {
			l.vals = nil
		}
		if cap(l.scratch) > limit*16 {
			l.scratch = nil
		}
	}
	for _, c := range n.children {
		c.keepScratch(limit)
	}
}

// shredRange converts rows [lo, hi) of a top-level column. Columns
// without nulls in the batch take a typed loop for the common types.
// Required columns need no levels: parquet-go's zero levels are right.
// It counts the range's nulls for the column's statistics.
func (l *leaf) shredRange(arr arrow.Array, lo, hi int) {
	vals := slices.Grow(l.vals[:0], hi-lo)[:hi-lo]
	l.vals = vals
	l.rangeNulls = 0
	l.observed = false // a chunk with nulls leaves its bounds to writeChunk
	if arr.NullN() > 0 {
		value := l.values(arr)
		null := parquet.Value{}.Level(0, 0, l.column)
		for i := range vals {
			if arr.IsNull(lo + i) {
				vals[i] = null
				l.rangeNulls++
			} else {
				vals[i] = value(lo+i).Level(0, 1, l.column)
			}
		}
		return
	}
	def := int(l.maxDef)
	l.observed = fillDense(vals, arr, lo, def, l.column, &l.stats)
	if !l.observed {
		value := l.values(arr)
		for i := range vals {
			vals[i] = value(lo + i)
		}
		if def > 0 {
			for i := range vals {
				vals[i] = vals[i].Level(0, def, l.column)
			}
		}
	}
}

// fillDense converts elements [lo, lo+len(vals)) of arr, which has no
// nulls, at definition level def (0: a required column, 1: an optional
// top-level one) of Parquet column column, and adds them to m, straight
// from the Arrow values: no indirect call per value, one pass over vals,
// and bounds computed on the typed slices. It handles the types of
// typical ingestion data and reports false for others.
func fillDense(vals []parquet.Value, arr arrow.Array, lo, def, column int, m *minMax) bool {
	hi := lo + len(vals)
	leveled := func(v parquet.Value) parquet.Value {
		if def > 0 {
			return v.Level(0, def, column)
		}
		return v
	}
	switch a := arr.(type) {
	case *array.Int64:
		src := a.Int64Values()[lo:hi]
		for i, x := range src {
			vals[i] = leveled(parquet.Int64Value(x))
		}
		observeInts(m, src)
	case *array.Int32:
		src := a.Int32Values()[lo:hi]
		for i, x := range src {
			vals[i] = leveled(parquet.Int32Value(x))
		}
		observeInts(m, src)
	case *array.Float64:
		src := a.Float64Values()[lo:hi]
		for i, x := range src {
			vals[i] = leveled(parquet.DoubleValue(x))
		}
		observeFloats(m, src)
	case *array.Timestamp:
		if a.DataType().(*arrow.TimestampType).Unit != arrow.Microsecond {
			return false
		}
		src := a.TimestampValues()[lo:hi]
		for i, x := range src {
			vals[i] = leveled(parquet.Int64Value(int64(x)))
		}
		observeInts(m, src)
	case *array.String:
		offs, data := a.ValueOffsets()[lo:hi+1], dataBuffer(a)
		for i := range vals {
			b := data[offs[i]:offs[i+1]]
			vals[i] = leveled(parquet.ByteArrayValue(b))
			m.observeBytes(b, bytes.Compare)
		}
	case *array.Boolean:
		allTrue, anyTrue := true, false
		for i := range vals {
			x := a.Value(lo + i)
			vals[i] = leveled(parquet.BooleanValue(x))
			allTrue, anyTrue = allTrue && x, anyTrue || x
		}
		observeBools(m, allTrue, anyTrue, len(vals))
	default:
		return false
	}
	return true
}

// shredSlots converts the positions of a nested leaf.
func (l *leaf) shredSlots(arr arrow.Array, slots []slot) {
	l.rangeNulls = -1
	value := l.values(arr)
	vals := l.vals[:0]
	for _, s := range slots {
		if s.idx < 0 {
			vals = append(vals, parquet.Value{}.Level(int(s.rep), int(s.def), l.column))
		} else {
			vals = append(vals, value(s.idx).Level(int(s.rep), int(s.def), l.column))
		}
	}
	l.vals = vals
}

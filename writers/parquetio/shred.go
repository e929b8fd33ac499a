package parquetio

import (
	"encoding/binary"
	"math/bits"
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

// shredRange converts rows [lo, hi) of a top-level column. The common
// types take a typed loop (fillTyped), with or without nulls: the nulls
// are then set from the validity bitmap (setNulls). Required columns need
// no levels: parquet-go's zero levels are right. It counts the range's
// nulls for the column's statistics.
func (l *leaf) shredRange(arr arrow.Array, lo, hi int) {
	vals := slices.Grow(l.vals[:0], hi-lo)[:hi-lo]
	l.vals = vals
	l.rangeNulls = 0
	l.observed = false // a chunk with nulls leaves its bounds to writeChunk
	lv := newLevels(0, l.maxDef, l.column)
	hasNulls := arr.NullN() > 0
	if hasNulls {
		// The typed loops read the slots under nulls too, so Write
		// requires fully valid arrays; on the Flight path flightsvc's
		// validate checked every offset (validateStrings for strings,
		// array.ValidateFull for the rest). The other types convert
		// the valid slots one by one. Null slots get their null last.
		if !fillTyped(vals, arr, lo, lv, nil) {
			value := l.values(arr)
			for i := range vals {
				if arr.IsValid(lo + i) {
					vals[i] = value(lo + i)
				}
			}
			lv.setAll(vals)
		}
		l.rangeNulls = setNulls(vals, arr, lo, l.column)
		return
	}
	l.observed = fillTyped(vals, arr, lo, lv, &l.stats)
	if !l.observed {
		value := l.values(arr)
		for i := range vals {
			vals[i] = value(lo + i)
		}
		lv.setAll(vals)
	}
}

// fillTyped converts elements [lo, lo+len(vals)) of arr with levels lv
// and, when m is not nil, adds them to m (arr has no nulls then), straight
// from the Arrow values: no indirect call per value and bounds computed on
// the typed slices. It handles the types of typical ingestion data and
// reports false for others.
func fillTyped(vals []parquet.Value, arr arrow.Array, lo int, lv levels, m *minMax) bool {
	hi := lo + len(vals)
	switch a := arr.(type) {
	case *array.Int64:
		src := a.Int64Values()[lo:hi]
		for i, x := range src {
			vals[i] = parquet.Int64Value(x)
		}
		if m != nil {
			observeInts(m, src)
		}
	case *array.Int32:
		src := a.Int32Values()[lo:hi]
		for i, x := range src {
			vals[i] = parquet.Int32Value(x)
		}
		if m != nil {
			observeInts(m, src)
		}
	case *array.Float64:
		src := a.Float64Values()[lo:hi]
		for i, x := range src {
			vals[i] = parquet.DoubleValue(x)
		}
		if m != nil {
			observeFloats(m, src)
		}
	case *array.Timestamp:
		if a.DataType().(*arrow.TimestampType).Unit != arrow.Microsecond {
			return false
		}
		src := a.TimestampValues()[lo:hi]
		for i, x := range src {
			vals[i] = parquet.Int64Value(int64(x))
		}
		if m != nil {
			observeInts(m, src)
		}
	case *array.String:
		offs, data := a.ValueOffsets()[lo:hi+1], dataBuffer(a)
		for i := range vals {
			vals[i] = parquet.ByteArrayValue(data[offs[i]:offs[i+1]])
		}
		if m != nil {
			m.observeStrings(data, offs)
		}
	case *array.Boolean:
		fillBools(vals, a, lo, m)
	default:
		return false
	}
	lv.setAll(vals)
	return true
}

// fillBools reads the value bits straight from the bitmap and folds
// them into the bounds without branches.
func fillBools(vals []parquet.Value, a *array.Boolean, lo int, m *minMax) {
	bits, off := a.Data().Buffers()[1].Bytes(), a.Data().Offset()+lo
	all, any := byte(1), byte(0)
	for i := range vals {
		j := off + i
		x := bits[j>>3] >> (j & 7) & 1
		vals[i] = parquet.BooleanValue(x != 0)
		all, any = all&x, any|x
	}
	if m != nil {
		observeBools(m, all != 0, any != 0, len(vals))
	}
}

// setNulls makes the elements of vals that are null in arr (vals holds
// elements [lo, lo+len(vals))) nulls at definition level 0, walking the
// validity bitmap 64 bits at a time, and returns their number.
func setNulls(vals []parquet.Value, arr arrow.Array, lo, column int) int {
	null := parquet.Value{}.Level(0, 0, column)
	bitmap, off := arr.NullBitmapBytes(), arr.Data().Offset()+lo
	n := 0
	for i := 0; i < len(vals); {
		j := off + i
		if j&7 == 0 && i+64 <= len(vals) {
			for w := ^binary.LittleEndian.Uint64(bitmap[j>>3:]); w != 0; w &= w - 1 {
				vals[i+bits.TrailingZeros64(w)] = null
				n++
			}
			i += 64
			continue
		}
		if bitmap[j>>3]>>(j&7)&1 == 0 {
			vals[i] = null
			n++
		}
		i++
	}
	return n
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

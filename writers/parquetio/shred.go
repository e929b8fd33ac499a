package parquetio

import (
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

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

// shred adds rows [lo, hi) of arr, n's column of a record, to n's
// leaves. Top-level primitive columns, the hot path, go straight to their
// leaf; nested columns go through slots.
func (n *node) shred(arr arrow.Array, lo, hi int, roots []slot) ([]slot, error) {
	if err := n.checkNulls(arr); err != nil {
		return roots, err
	}
	if n.kind == leafNode {
		return roots, n.leaf.writeFlat(arr, lo, hi)
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
		return n.leaf.addSlots(arr, present)
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
		l.vals.keep(limit)
		if cap(l.sel) > limit {
			l.sel = nil
		}
	}
	for _, c := range n.children {
		c.keepScratch(limit)
	}
}

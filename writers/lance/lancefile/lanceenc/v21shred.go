package lanceenc

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// Shredding a leaf with lists on its path into repetition and definition
// levels (format 2.1+; the inverse of v21levels.go's unraveling): each
// top-level row is walked from the outside in; a level is emitted per leaf
// value, per null or empty list and per null struct with a list below it,
// with the repetition level of the list it starts (the row's: max; a later
// element of the list k-th from the inside: k-1) and the definition level
// of the outermost null or empty container (0: valid).

// step is one container on the path from a top-level column to a leaf: a
// list, or a struct's child.
type step struct {
	list  bool
	child int
}

// node is a step with its definition levels and list depth.
type node struct {
	step
	nullDef, emptyDef uint16 // 0: the container is never null / empty
	k                 uint16 // lists: depth from the inside (innermost 1)
	listBelow         bool   // structs: a list lies between it and the leaf
}

type shredded struct {
	layers   []encodings21pb.RepDefLayer
	rep, def []uint16
	vals     []arrow.Array // slices of the leaf arrays, in level order (released by the caller)
	maxRep   uint16
}

// pathArrays returns the arrays of the containers on a chunk's path (the
// full child arrays below a list) and the leaf array.
func pathArrays(top arrow.Array, path []step) ([]arrow.Array, arrow.Array) {
	arrs := make([]arrow.Array, len(path))
	cur := top
	for i, s := range path {
		arrs[i] = cur
		switch {
		case s.list:
			cur = cur.(array.ListLike).ListValues()
		default:
			cur = cur.(*array.Struct).Field(s.child)
		}
	}
	return arrs, cur
}

func hasEmpty(a arrow.Array) bool {
	l := a.(array.ListLike)
	for i := range a.Len() {
		if a.IsValid(i) {
			if s, e := l.ValueOffsets(i); s == e {
				return true
			}
		}
	}
	return false
}

func shredLists(leaf []leafCol) shredded {
	path := leaf[0].path
	// Which containers are ever null or empty decides the layers.
	nulls := make([]bool, len(path)+1)
	empties := make([]bool, len(path))
	for _, l := range leaf {
		arrs, leafArr := pathArrays(l.top, path)
		for i, a := range arrs {
			nulls[i] = nulls[i] || a.NullN() > 0
			if path[i].list {
				empties[i] = empties[i] || hasEmpty(a)
			}
		}
		nulls[len(path)] = nulls[len(path)] || leafArr.NullN() > 0
	}
	var sh shredded
	nodes := make([]node, len(path))
	var level uint16
	item := encodings21pb.RepDefLayer_REPDEF_ALL_VALID_ITEM
	if nulls[len(path)] {
		item = encodings21pb.RepDefLayer_REPDEF_NULLABLE_ITEM
		level++
	}
	leafNull := level
	sh.layers = append(sh.layers, item)
	listBelow := false
	for i := len(path) - 1; i >= 0; i-- {
		n := node{step: path[i]}
		if !n.list {
			n.listBelow = listBelow
			layer := encodings21pb.RepDefLayer_REPDEF_ALL_VALID_ITEM
			if nulls[i] {
				level++
				n.nullDef, layer = level, encodings21pb.RepDefLayer_REPDEF_NULLABLE_ITEM
			}
			sh.layers = append(sh.layers, layer)
			nodes[i] = n
			continue
		}
		listBelow = true
		sh.maxRep++
		n.k = sh.maxRep
		layer := encodings21pb.RepDefLayer_REPDEF_ALL_VALID_LIST
		switch {
		case nulls[i] && empties[i]:
			n.nullDef, n.emptyDef = level+1, level+2
			level += 2
			layer = encodings21pb.RepDefLayer_REPDEF_NULL_AND_EMPTY_LIST
		case nulls[i]:
			level++
			n.nullDef, layer = level, encodings21pb.RepDefLayer_REPDEF_NULLABLE_LIST
		case empties[i]:
			level++
			n.emptyDef, layer = level, encodings21pb.RepDefLayer_REPDEF_EMPTYABLE_LIST
		}
		sh.layers = append(sh.layers, layer)
		nodes[i] = n
	}
	w := &shredder{nodes: nodes, leafNull: leafNull, sh: &sh}
	for _, l := range leaf {
		arrs, leafArr := pathArrays(l.top, path)
		w.arrs, w.leaf = arrs, leafArr
		for row := range l.top.Len() {
			w.walk(0, row, sh.maxRep, 0)
		}
		w.flush()
	}
	if level == 0 {
		sh.def = nil
	}
	return sh
}

type shredder struct {
	nodes    []node
	leafNull uint16
	arrs     []arrow.Array
	leaf     arrow.Array
	sh       *shredded
	run      [2]int // [start, end) of leaf values not yet sliced
}

func (w *shredder) emit(rep, def uint16) {
	w.sh.rep = append(w.sh.rep, rep)
	w.sh.def = append(w.sh.def, def)
}

// value records leaf value i, extending the current run of the leaf
// array when it follows it.
func (w *shredder) value(i int) {
	if w.run[1] != w.run[0] && w.run[1] == i {
		w.run[1]++
		return
	}
	w.flush()
	w.run = [2]int{i, i + 1}
}

func (w *shredder) flush() {
	if w.run[1] > w.run[0] {
		w.sh.vals = append(w.sh.vals, array.NewSlice(w.leaf, int64(w.run[0]), int64(w.run[1])))
	}
	w.run = [2]int{}
}

// walk emits the levels of position i of the container at depth d.
func (w *shredder) walk(d, i int, rep, def uint16) {
	if d == len(w.nodes) {
		if def == 0 && w.leaf.IsNull(i) {
			def = w.leafNull
		}
		w.emit(rep, def)
		w.value(i)
		return
	}
	n, a := w.nodes[d], w.arrs[d]
	if !n.list {
		if def == 0 && a.IsNull(i) {
			def = n.nullDef
			if n.listBelow { // the lists below have no position
				w.emit(rep, def)
				return
			}
		}
		w.walk(d+1, i, rep, def)
		return
	}
	if def != 0 || a.IsNull(i) {
		if def == 0 {
			def = n.nullDef
		}
		w.emit(rep, def)
		return
	}
	start, end := a.(array.ListLike).ValueOffsets(i)
	if start == end {
		w.emit(rep, n.emptyDef)
		return
	}
	for j := start; j < end; j++ {
		r := rep
		if j > start {
			r = n.k - 1
		}
		w.walk(d+1, int(j), r, 0)
	}
}

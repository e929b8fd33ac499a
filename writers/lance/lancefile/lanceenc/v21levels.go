package lanceenc

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// Assembly of a 2.1 leaf page into Arrow. Lance's levels count from the
// inside out: definition level 0 is a valid item, each nullable layer
// (item, struct, list) adds its own level above the ones inside it (a
// list that may be null and empty adds two: null, then empty), and a
// repetition level of k > 0 starts a list at the k-th list layer from the
// inside (max: a new row). The leaf's values are one per level whose
// definition is not a null or empty list.

// unraveler walks a page's levels from the innermost layer out.
type unraveler struct {
	layers   []encodings21pb.RepDefLayer
	rep, def []uint16
	toRep    []uint16 // definition level -> list depth at which it is visible
	layer    int
	defCmp   uint16
	depth    uint16
}

func newUnraveler(p *LeafPage) (*unraveler, error) {
	u := &unraveler{layers: p.layers, rep: p.rep, def: p.def, toRep: []uint16{0}}
	var depth uint16
	for _, l := range p.layers {
		switch l {
		case encodings21pb.RepDefLayer_REPDEF_ALL_VALID_ITEM, encodings21pb.RepDefLayer_REPDEF_ALL_VALID_LIST:
			if l == encodings21pb.RepDefLayer_REPDEF_ALL_VALID_LIST {
				depth++
			}
		case encodings21pb.RepDefLayer_REPDEF_NULLABLE_ITEM:
			u.toRep = append(u.toRep, depth)
		case encodings21pb.RepDefLayer_REPDEF_NULLABLE_LIST, encodings21pb.RepDefLayer_REPDEF_EMPTYABLE_LIST:
			depth++
			u.toRep = append(u.toRep, depth)
		case encodings21pb.RepDefLayer_REPDEF_NULL_AND_EMPTY_LIST:
			depth++
			u.toRep = append(u.toRep, depth, depth)
		default:
			return nil, fmt.Errorf("unknown rep/def layer %v", l)
		}
	}
	if p.rep != nil && p.def != nil && len(p.rep) != len(p.def) {
		return nil, fmt.Errorf("%d repetition levels for %d definition levels", len(p.rep), len(p.def))
	}
	for _, d := range p.def {
		if int(d) >= len(u.toRep) {
			return nil, fmt.Errorf("definition level %d above the page's %d levels", d, len(u.toRep)-1)
		}
	}
	return u, nil
}

func (u *unraveler) levels() int { return max(len(u.rep), len(u.def)) }

// visible reports whether level i has a position at the current depth.
func (u *unraveler) visible(i int) bool {
	return u.def == nil || u.toRep[u.def[i]] <= u.depth
}

// items is the number of leaf positions.
func (u *unraveler) items(fallback int) int {
	if u.levels() == 0 {
		return fallback
	}
	n := 0
	for i := range u.levels() {
		if u.visible(i) {
			n++
		}
	}
	return n
}

// validity consumes an item or struct layer: the validity of the n
// positions at the current depth (nil: all valid).
func (u *unraveler) validity(n int) ([]byte, int, error) {
	if u.layer >= len(u.layers) {
		return nil, 0, fmt.Errorf("the page has fewer rep/def layers than the column's type")
	}
	l := u.layers[u.layer]
	u.layer++
	switch l {
	case encodings21pb.RepDefLayer_REPDEF_ALL_VALID_ITEM:
		return nil, 0, nil
	case encodings21pb.RepDefLayer_REPDEF_NULLABLE_ITEM:
	default:
		return nil, 0, fmt.Errorf("rep/def layer %v where the type has an item or struct", l)
	}
	cmp := u.defCmp
	u.defCmp++
	if u.def == nil {
		return nil, 0, nil
	}
	bits := make([]byte, bitutil.BytesForBits(int64(n)))
	j, nulls := 0, 0
	for i := range u.def {
		if !u.visible(i) {
			continue
		}
		if j >= n {
			return nil, 0, fmt.Errorf("more positions in the levels than the %d values", n)
		}
		if u.def[i] <= cmp {
			bitutil.SetBit(bits, j)
		} else {
			nulls++
		}
		j++
	}
	if j != n {
		return nil, 0, fmt.Errorf("%d positions in the levels for %d values", j, n)
	}
	return bits, nulls, nil
}

// offsets consumes a list layer: one offset per list (plus the end) and
// the lists' validity; the levels shrink to one per list.
func (u *unraveler) offsets(children int) ([]int64, []byte, int, error) {
	if u.layer >= len(u.layers) || u.rep == nil {
		return nil, nil, 0, fmt.Errorf("the page has no repetition levels for a list")
	}
	l := u.layers[u.layer]
	u.layer++
	valid := u.defCmp
	var null, empty uint16 = math.MaxUint16, math.MaxUint16
	switch l {
	case encodings21pb.RepDefLayer_REPDEF_NULLABLE_LIST:
		null = valid + 1
		u.defCmp++
	case encodings21pb.RepDefLayer_REPDEF_EMPTYABLE_LIST:
		empty = valid + 1
		u.defCmp++
	case encodings21pb.RepDefLayer_REPDEF_NULL_AND_EMPTY_LIST:
		null, empty = valid+1, valid+2
		u.defCmp += 2
	case encodings21pb.RepDefLayer_REPDEF_ALL_VALID_LIST:
	default:
		return nil, nil, 0, fmt.Errorf("rep/def layer %v where the type has a list", l)
	}
	// Levels above this list's own and below the next list layer are
	// null structs around it: such a list is null. Higher levels belong
	// to an outer list and have no position here.
	top := u.defCmp
	for _, l := range u.layers[u.layer:] {
		if l == encodings21pb.RepDefLayer_REPDEF_NULLABLE_ITEM {
			top++
		} else if l != encodings21pb.RepDefLayer_REPDEF_ALL_VALID_ITEM {
			break
		}
	}
	var (
		offs     = make([]int64, 0, len(u.rep)+1)
		bits     BitWriter
		nulls    int
		cur      int64
		w        int
		one      = []byte{1}
		zero     = []byte{0}
		appendOK = func(ok bool) {
			if ok {
				bits.AppendBits(one, 0, 1)
			} else {
				bits.AppendBits(zero, 0, 1)
				nulls++
			}
		}
	)
	for i, r := range u.rep {
		if r == 0 {
			cur++
			continue
		}
		var d uint16
		if u.def != nil {
			d = u.def[i]
			u.def[w] = d
		}
		u.rep[w] = r - 1
		w++
		switch {
		case d <= valid:
			offs = append(offs, cur)
			cur++
			appendOK(true)
		case d == empty:
			offs = append(offs, cur)
			appendOK(true)
		case d == null || d <= top: // or a null struct around the list
			offs = append(offs, cur)
			appendOK(false)
		default:
			// masked by an outer list: no position at this depth
		}
	}
	offs = append(offs, cur)
	if cur != int64(children) {
		return nil, nil, 0, fmt.Errorf("lists hold %d items, the values are %d", cur, children)
	}
	u.rep = u.rep[:w]
	if u.def != nil {
		u.def = u.def[:w]
	}
	u.depth++
	return offs, bits.b, nulls, nil
}

// Assemble builds the Arrow array of type dt (the column's type reduced
// to the leaf's path) from a decoded page.
func Assemble(mem memory.Allocator, bud *Budget, dt arrow.DataType, p *LeafPage, rows uint64) (arrow.Array, error) {
	u, err := newUnraveler(p)
	if err != nil {
		return nil, err
	}
	// Containers from the inside out.
	var chain []arrow.DataType
	leaf := dt
	for {
		switch t := leaf.(type) {
		case *arrow.StructType:
			if t.NumFields() != 1 {
				return nil, fmt.Errorf("internal: struct path of %d fields", t.NumFields())
			}
			chain = append(chain, t)
			leaf = t.Field(0).Type
			continue
		case *arrow.ListType:
			chain = append(chain, t)
			leaf = t.Elem()
			continue
		case *arrow.LargeListType:
			chain = append(chain, t)
			leaf = t.Elem()
			continue
		}
		break
	}
	n := u.items(int(rows))
	vals := p.vals
	switch {
	case p.constant:
		vals, err = repeat(bud, vals, n)
	case p.allNull:
		vals, err = nullValues(bud, leaf, n)
	}
	if err != nil {
		return nil, err
	}
	if vals.n != n {
		return nil, fmt.Errorf("the page has %d values for %d items", vals.n, n)
	}
	valid, nulls, err := u.validity(n)
	if err != nil {
		return nil, err
	}
	d, err := leafData(mem, bud, leaf, vals, valid, nulls)
	if err != nil {
		return nil, err
	}
	for i := len(chain) - 1; i >= 0; i-- {
		var next arrow.ArrayData
		switch t := chain[i].(type) {
		case *arrow.StructType:
			v, nulls, err := u.validity(d.Len())
			if err != nil {
				d.Release()
				return nil, err
			}
			next = array.NewData(t, d.Len(), []*memory.Buffer{BufOrNil(v, nulls)}, []arrow.ArrayData{d}, nulls, 0)
		default:
			offs, v, nulls, err := u.offsets(d.Len())
			if err != nil {
				d.Release()
				return nil, err
			}
			ob := OffsetsBuffer(t, offs)
			if ob == nil {
				d.Release()
				return nil, fmt.Errorf("list of %d items does not fit 32-bit offsets", d.Len())
			}
			next = array.NewData(t, len(offs)-1, []*memory.Buffer{BufOrNil(v, nulls), ob}, []arrow.ArrayData{d}, nulls, 0)
		}
		d.Release()
		d = next
	}
	defer d.Release()
	if u.layer != len(u.layers) {
		return nil, fmt.Errorf("the page has %d rep/def layers, the column's type %d", len(u.layers), u.layer)
	}
	if uint64(d.Len()) != rows {
		return nil, fmt.Errorf("the page decodes to %d rows, it says %d", d.Len(), rows)
	}
	return array.MakeFromData(d), nil
}

// BufOrNil is v as a validity buffer, nil when nothing is null.
func BufOrNil(v []byte, nulls int) *memory.Buffer {
	if nulls == 0 || v == nil {
		return nil
	}
	return memory.NewBufferBytes(v)
}

// OffsetsBuffer is offs as the offsets buffer of type t (64-bit for the
// large types), nil when they do not fit 32 bits.
func OffsetsBuffer(t arrow.DataType, offs []int64) *memory.Buffer {
	if t.ID() == arrow.LARGE_LIST || t.ID() == arrow.LARGE_STRING || t.ID() == arrow.LARGE_BINARY {
		return memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(offs))
	}
	if offs[len(offs)-1] > math.MaxInt32 {
		return nil
	}
	o32 := make([]int32, len(offs))
	for i, o := range offs {
		o32[i] = int32(o)
	}
	return memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(o32))
}

// repeat expands a constant page's single value to n values.
func repeat(bud *Budget, v block, n int) (block, error) {
	if v.n != 1 {
		return block{}, fmt.Errorf("constant page with %d values", v.n)
	}
	size := uint64(len(v.data)) * uint64(n)
	if err := bud.SpendUnbacked(size+uint64(n)*8, "a constant page"); err != nil {
		return block{}, err
	}
	out := block{n: n, bits: v.bits}
	if v.offs != nil {
		out.offs = make([]uint64, n+1)
		for i := range n {
			out.offs[i+1] = uint64(i+1) * uint64(len(v.data))
		}
	}
	out.data = make([]byte, 0, size)
	for range n {
		out.data = append(out.data, v.data...)
	}
	return out, nil
}

// nullValues is n zeroed values of type dt, the slots of null items.
func nullValues(bud *Budget, dt arrow.DataType, n int) (block, error) {
	if err := bud.SpendUnbacked(NullBytes(dt, uint64(n)), "an all-null page"); err != nil {
		return block{}, err
	}
	if t, ok := dt.(*arrow.DictionaryType); ok { // a dictionary inside a struct or list
		dt = t.ValueType
	}
	switch t := dt.(type) {
	case *arrow.FixedSizeListType:
		if ew, ok := t.Elem().(arrow.FixedWidthDataType); ok {
			bits := ew.BitWidth() * int(t.Len())
			return block{n: n, bits: bits, data: make([]byte, (n*bits+7)/8)}, nil
		}
	case arrow.FixedWidthDataType:
		return block{n: n, bits: t.BitWidth(), data: make([]byte, (n*t.BitWidth()+7)/8)}, nil
	case arrow.BinaryDataType:
		return block{n: n, offs: make([]uint64, n+1)}, nil
	}
	return block{}, fmt.Errorf("all-null page of type %s", dt)
}

// leafData builds the leaf array of type dt from decoded values.
func leafData(mem memory.Allocator, bud *Budget, dt arrow.DataType, v block, valid []byte, nulls int) (arrow.ArrayData, error) {
	vb := BufOrNil(valid, nulls)
	switch t := dt.(type) {
	case *arrow.DictionaryType:
		// A dictionary inside a struct or list (readLeaf21 reads a
		// top-level one as its values): its page's values, encoded.
		plain, err := leafData(mem, bud, t.ValueType, v, valid, nulls)
		if err != nil {
			return nil, err
		}
		defer plain.Release()
		return DictEncode(mem, t, array.MakeFromData(plain))
	case *arrow.BooleanType:
		if v.offs != nil || (v.bits != 1 && v.bits != 8) {
			return nil, fmt.Errorf("bool column with %d-bit values", v.bits)
		}
		data := v.data
		if v.bits == 8 { // a constant page repeats a one-byte bitmap
			data = make([]byte, bitutil.BytesForBits(int64(v.n)))
			for i := range v.n {
				if v.data[i]&1 != 0 {
					bitutil.SetBit(data, i)
				}
			}
		}
		return array.NewData(dt, v.n, []*memory.Buffer{vb, memory.NewBufferBytes(data)}, nil, nulls, 0), nil
	case *arrow.FixedSizeListType:
		ew, ok := t.Elem().(arrow.FixedWidthDataType)
		if !ok || v.offs != nil || v.bits != ew.BitWidth()*int(t.Len()) {
			return nil, fmt.Errorf("fixed-size list of %s with %d-bit values", t.Elem(), v.bits)
		}
		child := array.NewData(t.Elem(), v.n*int(t.Len()), []*memory.Buffer{nil, memory.NewBufferBytes(v.data)}, nil, 0, 0)
		defer child.Release()
		return array.NewData(dt, v.n, []*memory.Buffer{vb}, []arrow.ArrayData{child}, nulls, 0), nil
	case arrow.FixedWidthDataType:
		if v.offs != nil || v.bits != t.BitWidth() {
			return nil, fmt.Errorf("%s column with %d-bit values", dt, v.bits)
		}
		return array.NewData(dt, v.n, []*memory.Buffer{vb, memory.NewBufferBytes(v.data)}, nil, nulls, 0), nil
	case arrow.BinaryDataType:
		if v.offs == nil {
			return nil, fmt.Errorf("%s column with fixed-width values", dt)
		}
		offs := make([]int64, len(v.offs))
		for i, o := range v.offs {
			offs[i] = int64(o)
		}
		ob := OffsetsBuffer(dt, offs)
		if ob == nil {
			return nil, fmt.Errorf("%s page of %d bytes does not fit 32-bit offsets", dt, len(v.data))
		}
		return array.NewData(dt, v.n, []*memory.Buffer{vb, ob, memory.NewBufferBytes(v.data)}, nil, nulls, 0), nil
	}
	return nil, fmt.Errorf("type %s is not supported by the 2.1 reader", dt)
}

// DictEncode turns plain values into a dictionary array of type t.
func DictEncode(mem memory.Allocator, t *arrow.DictionaryType, plain arrow.Array) (arrow.ArrayData, error) {
	defer plain.Release()
	b := array.NewDictionaryBuilder(mem, t)
	defer b.Release()
	if err := b.AppendArray(plain); err != nil {
		return nil, fmt.Errorf("dictionary column: %w", err)
	}
	a := b.NewArray()
	defer a.Release()
	// The builder wraps indices past the index type: a nested dictionary
	// (a top-level one is cut by dictChunks) of more values is refused.
	if n := a.(*array.Dictionary).Dictionary().Len(); n > Addressable(t.IndexType) {
		return nil, writers.Errorf(writers.ErrInvalid, "lance: a dictionary page of %d distinct values, more than its %s indices address", n, t.IndexType)
	}
	d := a.Data()
	d.Retain()
	return d, nil
}

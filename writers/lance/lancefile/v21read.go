package lancefile

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile/lanceenc"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/file2pb"
)

// Reading data files of format 2.1 and 2.2: one column per leaf field
// (structs and lists have none; their validity and offsets are levels in
// their leaves' pages), pages in the structural layouts of v21page.go.

const typePageLayout = "/lance.encodings21.PageLayout"

// decodeEncoding decodes a page's encoding: an ArrayEncoding (2.0) or a
// PageLayout (2.1, 2.2).
func (p *pageRef) decodeEncoding(e *file2pb.Encoding) error {
	if _, ok := e.GetLocation().(*file2pb.Encoding_Indirect); ok {
		return fmt.Errorf("indirect encodings are not supported")
	}
	a := &anypb.Any{}
	if err := Unmarshal(e.GetDirect().GetEncoding(), a); err != nil {
		return err
	}
	switch a.TypeUrl {
	case typeArrayEncoding:
		enc, err := decodeEncoding(a.Value)
		p.enc = enc
		return err
	case typePageLayout:
		pl := &encodings21pb.PageLayout{}
		if err := Unmarshal(a.Value, pl); err != nil {
			return fmt.Errorf("page layout: %w", err)
		}
		p.layout = pl
		return nil
	}
	return writers.Errorf(writers.ErrInvalid, "lance: page encoding %q is not one Quiver reads (formats 2.0 to 2.2)", a.TypeUrl)
}

// leafPath is one leaf of a top-level field: its field id and the field's
// type reduced to the path to it.
type leafPath struct {
	id int32
	dt arrow.DataType
	// varPacked: a packed struct with variable-width fields, read as one
	// large binary value per row (v21varpacked.go).
	varPacked *arrow.StructType
}

// leaves lists the leaves of field fl (type dt) in pre-order.
func (s *Schema) leaves(fl Field, dt arrow.DataType) ([]leafPath, error) {
	if st, ok := dt.(*arrow.StructType); ok && isPacked(fl.Metadata) && lanceenc.HasVariableField(st) {
		return []leafPath{{id: fl.ID, dt: arrow.BinaryTypes.LargeBinary, varPacked: st}}, nil
	}
	if st, ok := dt.(*arrow.StructType); ok && isPacked(fl.Metadata) {
		// A packed struct is one column of whole rows, read as fixed-size
		// binary values that mergeLeaves splits into the fields.
		w, err := packedWidth(st)
		return []leafPath{{id: fl.ID, dt: &arrow.FixedSizeBinaryType{ByteWidth: w}}}, err
	}
	var (
		kids = s.children(fl.ID)
		out  []leafPath
	)
	wrap := func(i int, f arrow.Field, mk func(arrow.Field) arrow.DataType) error {
		if i >= len(kids) {
			return fmt.Errorf("field %q has %d children in the schema", fl.Name, len(kids))
		}
		sub, err := s.leaves(kids[i], f.Type)
		if err != nil {
			return err
		}
		for _, l := range sub {
			if l.varPacked != nil {
				return writers.Errorf(writers.ErrInvalid, "lance: field %q is a packed struct with variable-width fields inside a struct or list, which Quiver does not read", kids[i].Name)
			}
			g := f
			g.Type = l.dt
			out = append(out, leafPath{id: l.id, dt: mk(g)})
		}
		return nil
	}
	switch t := dt.(type) {
	case *arrow.StructType:
		if t.NumFields() == 0 { // no column holds its rows in 2.1+
			return nil, writers.Errorf(writers.ErrInvalid, "lance: field %q is a struct without fields, which Quiver does not read", fl.Name)
		}
		for i, f := range t.Fields() {
			if err := wrap(i, f, func(g arrow.Field) arrow.DataType { return arrow.StructOf(g) }); err != nil {
				return nil, err
			}
		}
		return out, nil
	case *arrow.ListType:
		return out, wrap(0, t.ElemField(), func(g arrow.Field) arrow.DataType { return arrow.ListOfField(g) })
	case *arrow.LargeListType:
		return out, wrap(0, t.ElemField(), func(g arrow.Field) arrow.DataType { return arrow.LargeListOfField(g) })
	case *arrow.MapType: // stored as a list of its entries; mergeLeaves makes the map
		return out, wrap(0, t.ElemField(), func(g arrow.Field) arrow.DataType { return arrow.ListOfField(g) })
	}
	return []leafPath{{id: fl.ID, dt: dt}}, nil
}

func (f *FileReader) readFields21(mem memory.Allocator, bud *lanceenc.Budget, s *Schema, as *arrow.Schema, columnOf map[int32]int) ([]arrow.RecordBatch, error) {
	column := func(id int32) (int, error) {
		c, ok := columnOf[id]
		if !ok {
			return 0, fmt.Errorf("lance: data file has no column for field id %d", id)
		}
		return c, nil
	}
	var cols [][]arrow.Array
	defer func() {
		for _, c := range cols {
			lanceenc.ReleaseAll(c)
		}
	}()
	top := s.TopLevel()
	for i, fl := range top {
		if isBlobV2(fl.Metadata) {
			return nil, writers.Errorf(writers.ErrInvalid, "lance: column %q is a Lance blob v2 column (extension %s, format 2.2), which Quiver does not read", fl.Name, blobV2)
		}
		dt := as.Field(i).Type
		leaves, err := s.leaves(fl, dt)
		if err != nil {
			return nil, err
		}
		parts := make([]arrow.Array, 0, len(leaves))
		for _, l := range leaves {
			c, err := column(l.id)
			if err != nil {
				lanceenc.ReleaseAll(parts)
				return nil, err
			}
			// A lone primitive column (a merge's key scan) keeps its
			// pages as they are: the records follow them, and nothing is
			// copied into one array first.
			lone := len(top) == 1 && l.id == fl.ID && l.varPacked == nil && arrow.TypeEqual(l.dt, dt)
			chunks, err := f.readLeaf21(mem, bud, l.dt, c, !lone)
			if err == nil && l.varPacked != nil { // top-level, its only leaf
				var st arrow.Array
				st, err = lanceenc.UnpackVarStruct(bud, l.varPacked, chunks[0].(*array.LargeBinary))
				chunks[0].Release()
				chunks[0] = st
			}
			if err == nil && (len(chunks) > 1 || l.varPacked != nil) { // a dictionary, a lone column's pages or a variable packed column: top-level, its only leaf
				cols = append(cols, chunks)
				break
			}
			if err == nil && uint64(chunks[0].Len()) != f.Rows {
				err = fmt.Errorf("leaf column %d has %d rows, the file %d", l.id, chunks[0].Len(), f.Rows)
				chunks[0].Release()
			}
			if err != nil {
				lanceenc.ReleaseAll(parts)
				return nil, fmt.Errorf("lance: column %q: %w", fl.Name, err)
			}
			parts = append(parts, chunks[0])
		}
		if len(parts) == 0 {
			continue
		}
		d := mergeLeaves(dt, dataOf(parts))
		lanceenc.ReleaseAll(parts)
		arr := array.MakeFromData(d)
		d.Release()
		// The leaves' nested offsets and lengths must agree with the
		// first leaf's, which mergeLeaves took for every one of them.
		if err := array.Validate(arr); err != nil {
			arr.Release()
			return nil, fmt.Errorf("lance: column %q: its leaf columns disagree: %w", fl.Name, err)
		}
		cols = append(cols, []arrow.Array{arr})
	}
	chunks := cols
	cols = nil // records releases them
	return Records(as, chunks, int64(f.Rows))
}

func dataOf(as []arrow.Array) []arrow.ArrayData {
	out := make([]arrow.ArrayData, len(as))
	for i, a := range as {
		out[i] = a.Data()
	}
	return out
}

// readLeaf21 decodes every page of leaf column col as type dt (the
// field's type reduced to the path to this leaf): one array, or several
// for a dictionary whose distinct values its index type cannot address
// in one (joinPages); with join false, one array per page (a dictionary
// is still joined).
func (f *FileReader) readLeaf21(mem memory.Allocator, bud *lanceenc.Budget, dt arrow.DataType, col int, join bool) ([]arrow.Array, error) {
	if col < 0 || col >= len(f.columns) {
		return nil, fmt.Errorf("file has %d columns, the schema needs column %d", len(f.columns), col)
	}
	vt := dt // a dictionary's pages are read as its values (joinPages)
	if t, ok := dt.(*arrow.DictionaryType); ok {
		vt = t.ValueType
	}
	var parts []arrow.Array
	for i, p := range f.columns[col] {
		if p.layout == nil {
			lanceenc.ReleaseAll(parts)
			return nil, fmt.Errorf("page %d has no 2.1 page layout", i)
		}
		a, err := f.readPage21(mem, bud, vt, p)
		if err != nil {
			lanceenc.ReleaseAll(parts)
			return nil, fmt.Errorf("page %d: %w", i, err)
		}
		parts = append(parts, a)
	}
	if _, dict := dt.(*arrow.DictionaryType); !join && !dict && len(parts) > 1 {
		return parts, nil
	}
	return joinPages(mem, dt, parts)
}

// readPage21 decodes one page of a leaf column as type dt.
func (f *FileReader) readPage21(mem memory.Allocator, bud *lanceenc.Budget, dt arrow.DataType, p pageRef) (arrow.Array, error) {
	bufs, err := f.buffers(bud, p)
	if err != nil {
		return nil, err
	}
	if b, ok := p.layout.GetLayout().(*encodings21pb.PageLayout_BlobLayout); ok {
		return f.readBlobPage(mem, bud, dt, b.BlobLayout, bufs, p.length)
	}
	lp, err := lanceenc.DecodePage(bud, p.layout, bufs, p.length)
	if err != nil {
		return nil, err
	}
	return lanceenc.Assemble(mem, bud, dt, lp, p.length)
}

// leafFields returns the ids of s's leaf fields (no children) in
// pre-order: the columns of a 2.1+ file.
func leafFields(s *Schema) []int32 {
	var out []int32
	for _, f := range s.Fields {
		if len(s.children(f.ID)) == 0 && f.LogicalType != "struct" && f.LogicalType != "list" && f.LogicalType != "large_list" {
			out = append(out, f.ID)
		}
	}
	return out
}

// leafCount is the number of leaf columns of type dt.
func leafCount(dt arrow.DataType) int {
	switch t := dt.(type) {
	case *arrow.StructType:
		n := 0
		for _, f := range t.Fields() {
			n += fieldLeafCount(f)
		}
		return n
	case *arrow.ListType:
		return fieldLeafCount(t.ElemField())
	case *arrow.LargeListType:
		return fieldLeafCount(t.ElemField())
	case *arrow.MapType:
		return fieldLeafCount(t.ElemField())
	}
	return 1
}

// fieldLeafCount is the number of leaf columns of field f: one for a
// packed struct (its rows are one column).
func fieldLeafCount(f arrow.Field) int {
	if f.Type.ID() == arrow.STRUCT && isPacked(arrowMeta(f.Metadata)) {
		return 1
	}
	return leafCount(f.Type)
}

// mergeLeaves joins the per-leaf arrays of one field (each of the type
// reduced to its leaf's path) into the field's array: structs and lists
// take their validity and offsets from the first leaf, which all leaves
// carry alike. The result is a new reference.
func mergeLeaves(dt arrow.DataType, parts []arrow.ArrayData) arrow.ArrayData {
	switch t := dt.(type) {
	case *arrow.StructType:
		if _, ok := parts[0].DataType().(*arrow.FixedSizeBinaryType); ok {
			return unpackStruct(t, parts[0])
		}
		kids := make([]arrow.ArrayData, t.NumFields())
		at := 0
		for i, f := range t.Fields() {
			n := fieldLeafCount(f)
			sub := make([]arrow.ArrayData, n)
			for j := range n {
				sub[j] = parts[at+j].Children()[0]
			}
			kids[i] = mergeLeaves(f.Type, sub)
			at += n
		}
		p := parts[0]
		d := array.NewData(dt, p.Len(), p.Buffers()[:1], kids, p.NullN(), p.Offset())
		for _, k := range kids {
			k.Release()
		}
		return d
	case *arrow.ListType, *arrow.LargeListType, *arrow.MapType:
		sub := make([]arrow.ArrayData, len(parts))
		for j, p := range parts {
			sub[j] = p.Children()[0]
		}
		elem := mergeLeaves(dt.(arrow.ListLikeType).Elem(), sub)
		p := parts[0]
		d := array.NewData(dt, p.Len(), p.Buffers()[:2], []arrow.ArrayData{elem}, p.NullN(), p.Offset())
		elem.Release()
		return d
	}
	parts[0].Retain()
	return parts[0]
}

package parquetio

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/quiver-ingest/quiver/writers"
)

// FieldIDKey is the Arrow field metadata key whose value, when positive,
// becomes the Parquet field_id of the column, as in pqarrow.
const FieldIDKey = "PARQUET:field_id"

// nodeKind says how a node's Arrow array is shredded into Parquet levels.
type nodeKind uint8

const (
	leafNode   nodeKind = iota // a primitive column
	structNode                 // children: the struct fields
	listNode                   // children: [element]
	mapNode                    // children: [key, value]
)

// node is one Arrow field of the written schema, with the Dremel levels of
// its Parquet counterpart. The tree is built once per Writer.
type node struct {
	name     string
	path     []string
	nullable bool
	id       int // Parquet field_id (Arrow metadata PARQUET:field_id); 0: none
	kind     nodeKind
	children []*node
	leaf     *leaf // for leafNode only

	// defPresent is the definition level a value reaches when this node is
	// non-null; a non-empty list or map reaches one more.
	defPresent uint8
	// repLevel is the repetition level of a list's or map's repeated group.
	repLevel uint8

	// slots and elems are scratch reused across batches by the shredder:
	// the positions where this node is present, and the list elements
	// its parent list or map expanded (held by the first child).
	slots []slot
	elems []slot
}

// buildTree maps schema to nodes, numbering leaves in Parquet column order
// (depth first, fields in schema order). Unsupported types give an error
// wrapping writers.ErrInvalid that names the column, more than maxColumns
// leaves one that gives their number.
func buildTree(schema *arrow.Schema) ([]*node, []*leaf, error) {
	var leaves []*leaf
	roots := make([]*node, len(schema.Fields()))
	for i, f := range schema.Fields() {
		n, err := newNode(f, nil, 0, 0, &leaves)
		if err != nil {
			return nil, nil, err
		}
		roots[i] = n
	}
	if len(leaves) > maxColumns {
		return nil, nil, writers.Errorf(writers.ErrInvalid, "parquetio: schema has %d leaf columns, more than the %d a file may have (parquet-go, which reads them back, numbers columns in 16 bits): split the table", len(leaves), maxColumns)
	}
	return roots, leaves, nil
}

// maxColumns is the most leaf columns a file may have: parquet-go, which
// opens the files to check and read them, carries a column index in 16
// bits, one value reserved.
const maxColumns = parquet.MaxColumnIndex + 1

func newNode(f arrow.Field, parent []string, def, rep uint8, leaves *[]*leaf) (*node, error) {
	path := append(append([]string(nil), parent...), f.Name)
	n := &node{name: f.Name, path: path, nullable: f.Nullable}
	if v, ok := f.Metadata.GetValue(FieldIDKey); ok {
		id, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return nil, unsupported(path, f.Type, fmt.Sprintf("field id %q is not a 32-bit integer", v))
		}
		n.id = int(max(id, 0)) // pqarrow reads "no id" as -1
	}
	if f.Nullable {
		def++
	}
	n.defPresent = def
	switch t := f.Type.(type) {
	case *arrow.StructType:
		if t.NumFields() == 0 {
			return nil, unsupported(path, f.Type, "a struct needs at least one field")
		}
		n.kind = structNode
		for _, cf := range t.Fields() {
			c, err := newNode(cf, path, def, rep, leaves)
			if err != nil {
				return nil, err
			}
			n.children = append(n.children, c)
		}
	case *arrow.MapType:
		n.kind, n.repLevel = mapNode, rep+1
		key := t.KeyField()
		key.Nullable = false // Parquet map keys are required
		for _, cf := range []arrow.Field{key, t.ItemField()} {
			c, err := newNode(cf, path, def+1, rep+1, leaves)
			if err != nil {
				return nil, err
			}
			n.children = append(n.children, c)
		}
	case arrow.ListLikeType:
		if t.ID() != arrow.LIST && t.ID() != arrow.LARGE_LIST {
			return nil, unsupported(path, f.Type, "")
		}
		n.kind, n.repLevel = listNode, rep+1
		c, err := newNode(t.ElemField(), path, def+1, rep+1, leaves)
		if err != nil {
			return nil, err
		}
		n.children = []*node{c}
	default:
		l, err := newLeaf(path, f.Type)
		if err != nil {
			return nil, err
		}
		l.column, l.maxDef, l.maxRep = len(*leaves), def, rep
		*leaves = append(*leaves, l)
		n.kind, n.leaf = leafNode, l
	}
	return n, nil
}

// parquetNode returns n's Parquet schema node.
func (n *node) parquetNode() parquet.Node {
	var pn parquet.Node
	switch n.kind {
	case leafNode:
		pn = n.leaf.node
	case structNode:
		pn = groupOf(n.children)
	case listNode:
		pn = parquet.List(n.children[0].parquetNode())
	case mapNode:
		pn = parquet.Map(n.children[0].parquetNode(), n.children[1].parquetNode())
	}
	if n.id != 0 {
		pn = parquet.FieldID(pn, n.id)
	}
	if n.nullable {
		return parquet.Optional(pn)
	}
	return parquet.Required(pn)
}

// groupOf returns the ordered group of nodes.
func groupOf(nodes []*node) group {
	g := make(group, len(nodes))
	for i, c := range nodes {
		g[i] = namedNode{Node: c.parquetNode(), name: c.name, index: i}
	}
	return g
}

// schemaElements flattens the file schema of roots into the footer's
// schema elements, root first and depth first, as parquet-go's writer
// does: parquet-go's nodes give each element its types (List and Map the
// three-level groups Spark and Arrow write). It also returns each leaf's
// path in the Parquet schema (["xs", "list", "element"] for a list xs).
func schemaElements(roots []*node) ([]format.SchemaElement, [][]string) {
	var out []format.SchemaElement
	var paths [][]string
	var path []string
	var walk func(name string, n parquet.Node, root bool)
	walk = func(name string, n parquet.Node, root bool) {
		if !root {
			path = append(path, name)
			defer func() { path = path[:len(path)-1] }()
		}
		t := n.Type()
		e := format.SchemaElement{Name: name, FieldID: int32(n.ID())}
		if !root {
			switch {
			case n.Repeated():
				e.RepetitionType.Set(format.Repeated)
			case n.Optional():
				e.RepetitionType.Set(format.Optional)
			default:
				e.RepetitionType.Set(format.Required)
			}
		}
		if lt := t.LogicalType(); lt != nil {
			e.LogicalType = *lt
			if d, ok := lt.Value.(*format.DecimalType); ok {
				e.Scale.Set(d.Scale)
				e.Precision.Set(d.Precision)
			}
		}
		if n.Leaf() {
			if l := t.Length(); l > 0 {
				e.TypeLength.Set(int32(l))
			}
			if p := t.PhysicalType(); p != nil {
				e.Type.Set(*p)
			}
		} else {
			e.NumChildren.Set(int32(len(n.Fields())))
		}
		if c := t.ConvertedType(); c != nil {
			e.ConvertedType.Set(*c)
		}
		out = append(out, e)
		if n.Leaf() {
			paths = append(paths, slices.Clone(path))
			return
		}
		for _, f := range n.Fields() {
			walk(f.Name(), f, false)
		}
	}
	walk("schema", groupOf(roots), true)
	return out, paths
}

// columnOrders returns the sort order of each leaf's statistics.
func columnOrders(leaves []*leaf) []format.ColumnOrder {
	out := make([]format.ColumnOrder, len(leaves))
	for i, l := range leaves {
		if o := l.node.Type().ColumnOrder(); o != nil {
			out[i] = *o
		}
	}
	return out
}

func checkSchema(schema *arrow.Schema) error {
	_, _, err := buildTree(schema)
	return err
}

// unsupported returns the error for a column whose type cannot be written.
func unsupported(path []string, t arrow.DataType, why string) error {
	if why == "" {
		why = "supported: int8-int64, float32/64, bool, utf8, large_utf8, binary, large_binary, fixed_size_binary, date32, timestamp, decimal128, struct, list, large_list, map and dictionaries of these"
	}
	return writers.Errorf(writers.ErrInvalid, "parquetio: column %q has type %s, which cannot be written to Parquet (%s): cast or drop the column", strings.Join(path, "."), t, why)
}

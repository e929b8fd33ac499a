package parquetio

import (
	"fmt"
	"reflect"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"
)

// group is a Parquet group node whose fields keep the Arrow field order.
// parquet.Group is a map and sorts its fields by name, which would reorder
// the file's columns.
type group []namedNode

var _ parquet.Node = group(nil)

// namedNode is one field of a group: the index-th.
type namedNode struct {
	parquet.Node
	name  string
	index int
}

func (f namedNode) Name() string { return f.name }

// Value is only used by parquet-go's reflection-based row writing, which
// this package never uses; it follows the GoType struct layout.
func (f namedNode) Value(base reflect.Value) reflect.Value {
	return base.Field(f.index)
}

func (g group) ID() int                     { return 0 }
func (g group) String() string              { return fmt.Sprintf("group(%d fields)", len(g)) }
func (g group) Type() parquet.Type          { return parquet.Group{}.Type() }
func (g group) Optional() bool              { return false }
func (g group) Repeated() bool              { return false }
func (g group) Required() bool              { return true }
func (g group) Leaf() bool                  { return false }
func (g group) Encoding() encoding.Encoding { return nil }
func (g group) Compression() compress.Codec { return nil }
func (g group) Fields() []parquet.Field {
	fields := make([]parquet.Field, len(g))
	for i := range g {
		fields[i] = g[i]
	}
	return fields
}

// GoType returns a struct type with one field per group field (F0, F1,
// ...: column names need not be Go identifiers), as parquet.Node requires.
func (g group) GoType() reflect.Type {
	fields := make([]reflect.StructField, len(g))
	for i, f := range g {
		fields[i] = reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: f.GoType()}
	}
	return reflect.StructOf(fields)
}

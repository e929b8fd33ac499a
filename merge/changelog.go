package merge

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiver-ingest/quiver/writers"
)

// Names of the changelog metadata columns (see the package comment).
const (
	OpColumn     = "_op"
	TsColumn     = "_ts_ms"
	WeightColumn = "__weight"
)

// MetadataColumns returns the names of the changelog metadata columns, which
// never reach a target table. The slice is new on every call.
func MetadataColumns() []string { return []string{OpColumn, TsColumn, WeightColumn} }

// IsMetadataColumn reports whether name is a changelog metadata column.
func IsMetadataColumn(name string) bool {
	return name == OpColumn || name == TsColumn || name == WeightColumn
}

// StripMetadata returns schema without the changelog metadata columns, or
// schema itself when it has none. Schema-level metadata is kept.
func StripMetadata(schema *arrow.Schema) *arrow.Schema {
	keep := userColumns(schema)
	if len(keep) == schema.NumFields() {
		return schema
	}
	fields := make([]arrow.Field, len(keep))
	for i, c := range keep {
		fields[i] = schema.Field(c)
	}
	md := schema.Metadata()
	return arrow.NewSchema(fields, &md)
}

// StripMetadataRecord returns rec without the changelog metadata columns.
// rec is borrowed; the result is owned by the caller, who must Release it
// (it shares rec's arrays, so no data is copied; when rec has no metadata
// column the result is rec itself, retained once more).
func StripMetadataRecord(rec arrow.RecordBatch) arrow.RecordBatch {
	keep := userColumns(rec.Schema())
	if len(keep) == int(rec.NumCols()) {
		rec.Retain()
		return rec
	}
	cols := make([]arrow.Array, len(keep))
	for i, c := range keep {
		cols[i] = rec.Column(c)
	}
	return array.NewRecordBatch(StripMetadata(rec.Schema()), cols, rec.NumRows())
}

// userColumns returns the indices of schema's non-metadata columns.
func userColumns(schema *arrow.Schema) []int {
	keep := make([]int, 0, schema.NumFields())
	for i, f := range schema.Fields() {
		if !IsMetadataColumn(f.Name) {
			keep = append(keep, i)
		}
	}
	return keep
}

// op is a decoded _op value.
type op int8

const (
	opUpsert op = iota
	opDelete
	opInvalid
)

// parseOp maps an _op string to its op; the match is exact (case matters:
// "r" is a snapshot read, "R" is invalid).
func parseOp(s string) op {
	switch s {
	case "I", "U", "r":
		return opUpsert
	case "D":
		return opDelete
	}
	return opInvalid
}

// checkOpType validates the type of the _op column.
func checkOpType(t arrow.DataType) error {
	switch t := t.(type) {
	case *arrow.StringType, *arrow.LargeStringType:
		return nil
	case *arrow.DictionaryType:
		switch t.ValueType.ID() {
		case arrow.STRING, arrow.LARGE_STRING:
			return nil
		}
	}
	return writers.Errorf(writers.ErrInvalid, "merge: column %q has type %s; send it as utf8, large_utf8 or dictionary<utf8>", OpColumn, t)
}

// opDecoder decodes an _op column into a reusable buffer.
type opDecoder struct {
	ops  []op
	dict []op // per dictionary value, rebuilt per batch
}

type stringLike interface {
	arrow.Array
	Value(int) string
}

// decode fills d.ops with one op per row of col. A bad value is a *RowError
// with StreamRow == Row.
func (d *opDecoder) decode(col arrow.Array) error {
	n := col.Len()
	d.ops = resize(d.ops, n)
	switch c := col.(type) {
	case *array.Dictionary:
		dv := c.Dictionary().(stringLike)
		d.dict = resize(d.dict, dv.Len())
		for i := range d.dict {
			d.dict[i] = opUpsert // a null dictionary value is a null op
			if dv.IsValid(i) {
				d.dict[i] = parseOp(dv.Value(i))
			}
		}
		for i := range n {
			if c.IsNull(i) {
				d.ops[i] = opUpsert
				continue
			}
			idx := c.GetValueIndex(i)
			if d.ops[i] = d.dict[idx]; d.ops[i] == opInvalid {
				return badOp(i, dv.Value(idx))
			}
		}
	case stringLike:
		for i := range n {
			if c.IsNull(i) {
				d.ops[i] = opUpsert
				continue
			}
			if d.ops[i] = parseOp(c.Value(i)); d.ops[i] == opInvalid {
				return badOp(i, c.Value(i))
			}
		}
	default:
		return checkOpType(col.DataType())
	}
	return nil
}

func badOp(row int, v string) error {
	return &RowError{Row: row, StreamRow: int64(row), Column: OpColumn,
		Reason: fmt.Sprintf("value %q is not a changelog op; use I, U or r (upsert), D (delete) or null (upsert)", v)}
}

// resize returns s with length n, reusing its capacity.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

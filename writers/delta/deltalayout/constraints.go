package deltalayout

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltaexpr"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// Rows are checked against the table's CHECK constraints and column
// invariants (deltalog.Constraints) before they are staged: an append's
// or overwrite's batch by Write, an upsert's live rows (inserts and
// updates, filled as written) by its precommit. The descriptor records
// the constraints checked; a commit onto a table whose constraints
// differ (one added concurrently) is a conflict (checkConstraints), never
// rows published unchecked.

// checks are a layout's constraints bound to the Arrow schema of the
// rows last checked, so that a stream's batches bind them once.
type checks struct {
	mu     sync.Mutex
	schema *arrow.Schema
	bound  []*deltaexpr.Bound
}

// checkRows returns ErrInvalid naming the first of the layout's
// constraints that a row of rec violates (FALSE or NULL, as Delta), its
// expression and the row's values in the columns it reads. rec has the
// table's logical column names.
func (l *Layout) CheckRows(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch) error {
	if rec.NumRows() == 0 || len(l.Cons) == 0 {
		return nil
	}
	if plain := decodedSchema(rec.Schema()); plain != nil {
		// The expressions read values: dictionary columns are decoded.
		decoded, err := Conform(ctx, mem, rec, plain)
		if err != nil {
			return err
		}
		defer decoded.Release()
		rec = decoded
	}
	bound, err := l.bind(rec.Schema())
	if err != nil {
		return err
	}
	for i, b := range bound {
		if row, bad := b.FirstViolation(rec); bad {
			return writers.Errorf(writers.ErrInvalid, "delta: %s is violated by a row with %s (a row passes only when the expression is true, not false or null): nothing of these rows is published; fix them and replay", l.Cons[i], b.RowValues(rec, row))
		}
	}
	return nil
}

// decodedSchema returns schema with its dictionary columns as their
// values' type; nil when it has none.
func decodedSchema(schema *arrow.Schema) *arrow.Schema {
	var fields []arrow.Field
	for i, f := range schema.Fields() {
		if d, ok := f.Type.(*arrow.DictionaryType); ok {
			if fields == nil {
				fields = slices.Clone(schema.Fields())
			}
			fields[i].Type = d.ValueType
		}
	}
	if fields == nil {
		return nil
	}
	md := schema.Metadata()
	return arrow.NewSchema(fields, &md)
}

// bind returns the layout's constraints bound to schema.
func (l *Layout) bind(schema *arrow.Schema) ([]*deltaexpr.Bound, error) {
	l.checks.mu.Lock()
	defer l.checks.mu.Unlock()
	if l.checks.schema != nil && l.checks.schema.Equal(schema) {
		return l.checks.bound, nil
	}
	bound := make([]*deltaexpr.Bound, len(l.Cons))
	for i, c := range l.Cons {
		b, err := c.Expr.Bind(schema)
		if err != nil {
			return nil, writers.Errorf(writers.ErrInvalid, "delta: %s cannot be checked on these rows: %v", c, err)
		}
		bound[i] = b
	}
	l.checks.schema, l.checks.bound = schema, bound
	return bound, nil
}

// TableConstraints returns the constraints of the table of snap. The
// writer checks every snapshot it reads (latest: CheckWritable), so one
// outside the subset, added after the endpoint opened, is refused there;
// should one reach here it is refused the same way, an unsupported table
// (deltalog.ErrUnsupported), not the client's input.
func TableConstraints(snap *deltalog.Snapshot) ([]deltalog.Constraint, error) {
	cons, err := deltalog.Constraints(&snap.Metadata)
	if err != nil {
		if werr := deltalog.CheckWritable(snap); werr != nil {
			return nil, fmt.Errorf("delta: %w", werr)
		}
		return nil, writers.Errorf(writers.ErrInvalid, "delta: %v", err)
	}
	return cons, nil
}

// CheckedConstraints is what a descriptor records of cons: expression by
// name (nil without).
func CheckedConstraints(cons []deltalog.Constraint) map[string]string {
	if len(cons) == 0 {
		return nil
	}
	m := make(map[string]string, len(cons))
	for _, c := range cons {
		m[c.Name] = c.Text
	}
	return m
}

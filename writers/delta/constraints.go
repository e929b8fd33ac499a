package delta

import (
	"maps"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// Rows are checked against the table's CHECK constraints and column
// invariants (deltalog.Constraints) before they are staged: an append's
// or overwrite's batch by Write, an upsert's live rows (inserts and
// updates, filled as written) by its precommit. The descriptor records
// the constraints checked; a commit onto a table whose constraints
// differ (one added concurrently) is a conflict (checkConstraints), never
// rows published unchecked.

// checkRows returns ErrInvalid naming the first of cons that a row of rec
// violates (FALSE or NULL, as Delta), its expression and the row's values
// in the columns it reads. rec has the table's logical column names.
func checkRows(cons []deltalog.Constraint, rec arrow.RecordBatch) error {
	if rec.NumRows() == 0 {
		return nil
	}
	for _, c := range cons {
		b, err := c.Expr.Bind(rec.Schema())
		if err != nil {
			return writers.Errorf(writers.ErrInvalid, "delta: %s cannot be checked on these rows: %v", c, err)
		}
		if row, bad := b.FirstViolation(rec); bad {
			return writers.Errorf(writers.ErrInvalid, "delta: %s is violated by a row with %s (a row passes only when the expression is true, not false or null): nothing of these rows is published; fix them and replay", c, b.RowValues(rec, row))
		}
	}
	return nil
}

// checkedConstraints is what a descriptor records of cons: expression by
// name (nil without).
func checkedConstraints(cons []deltalog.Constraint) map[string]string {
	if len(cons) == 0 {
		return nil
	}
	m := make(map[string]string, len(cons))
	for _, c := range cons {
		m[c.Name] = c.Text
	}
	return m
}

// checkConstraints refuses descriptors whose rows were checked against
// other constraints than the table of meta has now: a constraint added
// (or changed) after the rows were checked would let rows violating it
// in. ErrConflict: a replay checks them against the table as it is.
func checkConstraints(meta *deltalog.Metadata, ds []*descriptor) error {
	cons, err := deltalog.Constraints(meta)
	if err != nil {
		return writers.Errorf(writers.ErrInvalid, "delta: %v", err)
	}
	want := checkedConstraints(cons)
	for i, d := range ds {
		if len(d.Adds) == 0 || maps.Equal(d.Constraints, want) {
			continue
		}
		for _, c := range cons {
			if text, ok := d.Constraints[c.Name]; !ok || text != c.Text {
				return writers.Errorf(writers.ErrConflict, "delta: descriptor %d: the table's %s was added or changed after the rows were checked: roll back the transaction and replay it", i, c)
			}
		}
		// A constraint dropped since: the rows were checked more strictly.
	}
	return nil
}

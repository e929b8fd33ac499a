package deltalog

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/quiver-ingest/quiver/writers/delta/deltaexpr"
)

// ConstraintPrefix starts the table property of each CHECK constraint:
// delta.constraints.<name> = <Spark SQL expression>.
const ConstraintPrefix = "delta.constraints."

// invariantsKey is the column metadata of a (legacy) column invariant:
// a JSON string {"expression":{"expression":"<Spark SQL>"}}.
const invariantsKey = "delta.invariants"

// Constraint is a rule every row of a table must satisfy: a CHECK
// constraint or a column invariant. A row satisfies it only when Expr is
// TRUE (deltaexpr).
type Constraint struct {
	// Name is the constraint's name, or "invariant on column <path>".
	Name      string
	Invariant bool
	// Text is the expression as the table states it.
	Text string
	Expr *deltaexpr.Expr
}

// Constraints returns the CHECK constraints and column invariants of the
// table of m, by name, parsed and bound to its schema (logical names, as
// Spark writes them). One outside the subset deltaexpr evaluates, or not
// over the table's columns, is an error naming it (CheckWritable refuses
// such tables).
func Constraints(m *Metadata) ([]Constraint, error) {
	var out []Constraint
	for k, text := range m.Configuration {
		if name, ok := strings.CutPrefix(k, ConstraintPrefix); ok {
			out = append(out, Constraint{Name: name, Text: text})
		}
	}
	if len(out) == 0 && !strings.Contains(m.SchemaString, invariantsKey) {
		return nil, nil
	}
	schema, err := m.Schema()
	if err != nil {
		return nil, err
	}
	if out, err = appendInvariants(out, schema.Fields, ""); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Constraint) int { return strings.Compare(a.Name, b.Name) })
	arrowSchema, err := schema.ToArrow()
	if err != nil {
		return nil, err
	}
	for i := range out {
		c := &out[i]
		if c.Expr, err = deltaexpr.Parse(c.Text); err == nil {
			_, err = c.Expr.Bind(arrowSchema)
		}
		if err != nil {
			return nil, fmt.Errorf("constraint %s (%q): %w", deltaexpr.Clip(c.Name), deltaexpr.Clip(c.Text), err)
		}
	}
	return out, nil
}

// String names c and its expression, for messages.
func (c Constraint) String() string {
	if c.Invariant {
		return fmt.Sprintf("%s (%s)", deltaexpr.Clip(c.Name), deltaexpr.Clip(c.Text))
	}
	return fmt.Sprintf("CHECK constraint %s (%s)", deltaexpr.Clip(c.Name), deltaexpr.Clip(c.Text))
}

// appendInvariants appends the invariants of fields (struct members
// included) under parent.
func appendInvariants(out []Constraint, fields []StructField, parent string) ([]Constraint, error) {
	for _, f := range fields {
		path := parent + f.Name
		if raw, ok := f.Metadata[invariantsKey]; ok {
			var doc string
			var inv struct {
				Expression struct {
					Expression string `json:"expression"`
				} `json:"expression"`
			}
			if json.Unmarshal(raw, &doc) != nil || json.Unmarshal([]byte(doc), &inv) != nil || inv.Expression.Expression == "" {
				return nil, fmt.Errorf("column %s: unreadable %s %s", deltaexpr.Clip(path), invariantsKey, deltaexpr.Clip(string(raw)))
			}
			out = append(out, Constraint{Name: "invariant on column " + path, Invariant: true, Text: inv.Expression.Expression})
		}
		if f.Type.Name == "struct" {
			var err error
			if out, err = appendInvariants(out, f.Type.Fields, path+"."); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

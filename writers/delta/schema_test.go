package delta

import (
	"errors"
	"strings"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

func parseSchema(t *testing.T, fields string) *deltalog.Schema {
	t.Helper()
	s, err := deltalog.ParseSchema(`{"type":"struct","fields":[` + fields + `]}`)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReconcileNestedField: a field added inside an existing struct
// column (which Spark's mergeSchema accepts) is refused with a message
// naming the nested field and what to do, in both evolution modes; a
// changed type, nested or not, keeps the cast message. (Before, the
// nested addition got "cast it (changing a column's type is not
// supported)".)
func TestReconcileNestedField(t *testing.T) {
	const (
		id    = `{"name":"id","type":"long","nullable":true,"metadata":{}}`
		s     = `{"name":"s","type":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}},{"name":"in","type":{"type":"struct","fields":[{"name":"x","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}`
		sAddC = `{"name":"s","type":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}},{"name":"in","type":{"type":"struct","fields":[{"name":"x","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},{"name":"c","type":"long","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}`
		sAddY = `{"name":"s","type":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}},{"name":"in","type":{"type":"struct","fields":[{"name":"x","type":"string","nullable":true,"metadata":{}},{"name":"y","type":"date","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}`
		sCast = `{"name":"s","type":{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}},{"name":"in","type":{"type":"struct","fields":[{"name":"x","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},{"name":"c","type":"long","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}`
	)
	table := parseSchema(t, id+","+s)
	for _, tt := range []struct {
		name, got string
		want      []string
	}{
		{"field added", sAddC, []string{`column "s" has the field "s.c", which the table's struct lacks`, "ADD COLUMNS (s.c LONG)", "send it as a top-level column"}},
		{"field added deeper", sAddY, []string{`the field "s.in.y"`, "ADD COLUMNS (s.in.y DATE)"}},
		{"type changed too", sCast, []string{"cast it (changing a column's type is not supported)"}},
	} {
		for _, evolve := range []bool{false, true} {
			_, err := deltalayout.Reconcile(table, parseSchema(t, id+","+tt.got), evolve)
			if !errors.Is(err, writers.ErrInvalid) {
				t.Errorf("%s (evolve %v): %v, want ErrInvalid", tt.name, evolve, err)
				continue
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s (evolve %v): %v\nlacks %q", tt.name, evolve, err, w)
				}
			}
		}
	}
	if _, err := deltalayout.Reconcile(table, parseSchema(t, id+","+s), true); err != nil {
		t.Errorf("the table's own schema: %v", err)
	}
}

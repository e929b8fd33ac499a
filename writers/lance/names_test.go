package lance

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/lanceprobe/probetest"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

func i64(name string) arrow.Field { return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64} }

func structOf(name string, fields ...arrow.Field) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.StructOf(fields...)}
}

// acceptedNames are edge cases Lance accepts and reads back (LanceDB
// 0.31.0 creates, reads and appends to such tables): nested names with
// '.', '`', or empty, names differing only in case, spaces and quotes,
// and a nested field named like a system column.
var acceptedNames = []arrow.Field{
	i64("id"), i64("ID"), i64("a b"), i64(`a"b`), i64("*"), i64("prix€"),
	structOf("s", i64("a.b"), i64("c`d"), i64(""), i64("_rowid"), i64("A"), i64("a")),
}

// TestColumnNames lists the column-name rules of Lance (see names.go),
// each with the error LanceDB 0.31.0 (lance 8.0.0) gives as a comment: a
// stream breaking one is refused with ErrInvalid naming the column and
// the rule, by CheckSchema and by Write on an endpoint without a dataset
// (which its first commit would create), before anything is staged.
func TestColumnNames(t *testing.T) {
	refused := []struct {
		name   string
		fields []arrow.Field
		column string // the path the error names
	}{
		// createTable: "Top level field prix.€ cannot contain `.`. Maybe
		// you meant to create a struct field?"
		{"dot", []arrow.Field{i64("id"), i64("prix.€")}, "prix.€"},
		// createTable: `Duplicate field name "x" in schema`
		{"duplicate", []arrow.Field{i64("x"), i64("x")}, "x"},
		// createTable succeeds; every query: "Schema error: No field named ."
		{"empty", []arrow.Field{i64("")}, ""},
		// createTable succeeds; every query: "Schema error: No field named "a`b"."
		{"backtick", []arrow.Field{i64("a`b")}, "a`b"},
		// createTable succeeds; every query: "TakeExec requires the input
		// plan to have a column named '_rowaddr' or '_rowid'"
		{"nested-duplicate", []arrow.Field{structOf("s", i64("a"), i64("a"))}, "s.a"},
		{"list-duplicate", []arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.StructOf(i64("a"), structOf("t", i64("b"), i64("b"))))}}, "l.item.t.b"},
		// createTable: "The column _rowid is a reserved name and cannot be
		// used in a Lance dataset" (and _rowaddr, _rowoffset).
		{"rowid", []arrow.Field{i64("_rowid")}, "_rowid"},
		{"rowaddr", []arrow.Field{i64("_rowaddr")}, "_rowaddr"},
		{"rowoffset", []arrow.Field{i64("_rowoffset")}, "_rowoffset"},
		// createTable succeeds; every query panics: "Attempt to add fields
		// [["_rowid", "_rowaddr", "_row_last_updated_at_version",
		// "_row_created_at_version"]] would lead to duplicate field names"
		{"created-at-version", []arrow.Field{i64("_row_created_at_version")}, "_row_created_at_version"},
		{"updated-at-version", []arrow.Field{i64("_row_last_updated_at_version")}, "_row_last_updated_at_version"},
		// createTable succeeds; vector search: "Attempt to merge
		// incompatible fields: Field(… name=_distance, type=double) and
		// Field(id=-1, name=_distance, type=float)"; full-text search
		// likewise for _score.
		{"distance", []arrow.Field{i64("id"), i64("_distance")}, "_distance"},
		{"score", []arrow.Field{i64("id"), i64("_score")}, "_score"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			_, dir := dbDir(t, "t")
			w := newWriter(t, dir, mem)
			defer w.Close(context.Background())
			ctx := context.Background()
			schema := arrow.NewSchema(tc.fields, nil)
			named := strconv.Quote(tc.column)
			if err := w.CheckSchema(ctx, schema); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), named) {
				t.Fatalf("CheckSchema: %v, want ErrInvalid naming %s", err, named)
			}
			rec := writertest.ZeroRecord(mem, schema, 2)
			defer rec.Release()
			if err := w.Write(ctx, writers.AutoKey("s"), rec); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), named) {
				t.Fatalf("Write: %v, want ErrInvalid naming %s", err, named)
			}
			if files, _ := os.ReadDir(filepath.Join(dir, "data")); len(files) > 0 {
				t.Fatalf("a refused stream staged %d data files", len(files))
			}
		})
	}

	t.Run("accepted", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		_, dir := dbDir(t, "t")
		w := newWriter(t, dir, mem)
		defer w.Close(context.Background())
		schema := arrow.NewSchema(acceptedNames, nil)
		if err := w.CheckSchema(context.Background(), schema); err != nil {
			t.Fatalf("CheckSchema of names Lance accepts: %v", err)
		}
		rec := writertest.ZeroRecord(mem, schema, 3)
		defer rec.Release()
		commitRows(t, w, writers.AutoKey("s"), rec)
		if got := published(t, w); got != 3 {
			t.Fatalf("%d rows published, want 3", got)
		}
	})
}

// TestLanceDBReadsAcceptedNames: LanceDB reads every row of a dataset
// whose column names are the edge cases Quiver accepts.
func TestLanceDBReadsAcceptedNames(t *testing.T) {
	probetest.Dir(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	db, dir := dbDir(t, "names")
	w := newWriter(t, dir, mem)
	defer w.Close(context.Background())
	rec := writertest.ZeroRecord(mem, arrow.NewSchema(acceptedNames, nil), 3)
	defer rec.Release()
	commitRows(t, w, writers.AutoKey("s"), rec)
	out := probetest.Run(t, "dump", db, "names", "--on", "id")
	wantLines(t, out, `"version":1`, `"a b":"0"`, `"ID":"0"`, `"a.b":"0"`, "\"c`d\":\"0\"")
	if n := strings.Count(out, `"a b"`); n != 3 {
		t.Fatalf("LanceDB read %d rows, want 3:\n%s", n, out)
	}
}

package delta

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/duckcheck"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog/dv"
)

// nullText renders a null value in row strings.
const nullText = "∅"

// tableRows reads the table at cfg's latest version with deltalog and
// parquetio and renders each row as its values in the order of cols
// (partition columns from the add's partitionValues), "|"-separated,
// sorted.
func tableRows(t *testing.T, cfg *Config, cols []string) []string {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var out []string
	eachLiveBatch(t, cfg, mem, func(a *deltalog.Add, rec arrow.RecordBatch) {
		for row := range int(rec.NumRows()) {
			vals := make([]string, len(cols))
			for i, c := range cols {
				if idx := rec.Schema().FieldIndices(c); len(idx) > 0 {
					vals[i] = cellText(rec.Column(idx[0]), row)
				} else if v := a.PartitionValues[c]; v != nil {
					vals[i] = *v
				} else {
					vals[i] = nullText
				}
			}
			out = append(out, strings.Join(vals, "|"))
		}
	})
	slices.Sort(out)
	return out
}

// cellText renders one value as the model and DuckDB rows do.
func cellText(col arrow.Array, row int) string {
	if col.IsNull(row) {
		return nullText
	}
	return col.ValueStr(row)
}

// duckRows reads every active file of the file:// table at cfg with
// DuckDB and renders the rows as tableRows does.
func duckRows(t *testing.T, db *duckcheck.DB, cfg *Config, cols []string) []string {
	t.Helper()
	root := strings.TrimPrefix(cfg.TableURI, "file://")
	snap := snapshot(t, cfg)
	var out []string
	for _, a := range snap.Files() {
		key, err := deltalog.DecodePath(a.Path)
		if err != nil {
			t.Fatal(err)
		}
		sel := make([]string, len(cols))
		for i, c := range cols {
			sel[i] = strconv.Quote(c)
			if _, ok := a.PartitionValues[c]; ok {
				sel[i] = "NULL"
				if v := a.PartitionValues[c]; v != nil {
					sel[i] = "'" + strings.ReplaceAll(*v, "'", "''") + "'"
				}
			}
		}
		query := "SELECT " + strings.Join(sel, ", ") + " FROM " + duckcheck.Parquet(filepath.Join(root, key))
		if a.DeletionVector != nil {
			query = "SELECT " + strings.Join(sel, ", ") + " FROM " + duckcheck.ParquetRowNumbered(filepath.Join(root, key)) + duckSkip(t, cfg, a)
		}
		for _, row := range db.Query(t, query) {
			vals := make([]string, len(row))
			for i, v := range row {
				switch v := v.(type) {
				case nil:
					vals[i] = nullText
				case float64:
					vals[i] = strconv.FormatFloat(v, 'g', -1, 64)
				default:
					vals[i] = fmt.Sprint(v)
				}
			}
			out = append(out, strings.Join(vals, "|"))
		}
	}
	slices.Sort(out)
	return out
}

// duckSkip returns the WHERE clause that leaves out the rows a's deletion
// vector marks, by DuckDB's own row numbers (duckcheck.ParquetRowNumbered). The
// positions come from our decoder, which is checked byte for byte against
// deletion vectors written by Spark (deltalog's golden tests).
func duckSkip(t *testing.T, cfg *Config, a *deltalog.Add) string {
	t.Helper()
	ctx := context.Background()
	b := tableBucket(t, cfg)
	gone, err := dv.ReadDeletionVector(ctx, b, a.DeletionVector)
	if err != nil {
		t.Fatalf("deletion vector of %s: %v", a.Path, err)
	}
	list := make([]string, len(gone))
	for i, p := range gone {
		list[i] = strconv.FormatInt(p, 10)
	}
	return " WHERE file_row_number NOT IN (" + strings.Join(list, ",") + ")"
}

// sameRows fails the test when got and want (sorted) differ, showing the
// first difference.
func sameRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Fatalf("%s: %d rows, want %d; first difference at sorted row %d:\n got  %s\n want %s", what, len(got), len(want), i, got[i], want[i])
		}
	}
	t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
}

// goldenCopy copies the reference table name (testdata/delta-golden,
// written by its generate.py) into a fresh folder and returns its file://
// URI.
func goldenCopy(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("..", "..", "testdata", "delta-golden", name)
	if _, err := os.Stat(filepath.Join(src, "_delta_log")); err != nil {
		t.Fatalf("golden table %s is missing (make golden writes testdata/delta-golden): %v", name, err)
	}
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatalf("copy golden table %s: %v", name, err)
	}
	return "file://" + dst
}

// precommitOne writes recs under key and precommits it.
func precommitOne(t *testing.T, w *Writer, key writers.TxnKey, recs ...arrow.RecordBatch) writers.Descriptor {
	t.Helper()
	ctx := context.Background()
	for _, r := range recs {
		if err := w.Write(ctx, key, r); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	d, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatalf("Precommit: %v", err)
	}
	return d
}

// commitOne writes recs under key, precommits and commits.
func commitOne(t *testing.T, w *Writer, key writers.TxnKey, recs ...arrow.RecordBatch) writers.CommitInfo {
	t.Helper()
	d := precommitOne(t, w, key, recs...)
	info, err := w.Commit(context.Background(), key, []writers.Descriptor{d})
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return info
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

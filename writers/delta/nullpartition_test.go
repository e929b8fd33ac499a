package delta

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

// nameRow is a one-row batch of writertest.Schema with id and name (nil:
// null).
func (c *tc) nameRow(id int64, name *string) arrow.RecordBatch {
	b := array.NewRecordBuilder(c.mem, writertest.Schema())
	defer b.Release()
	b.Field(0).(*array.Int64Builder).Append(id)
	if name == nil {
		b.Field(1).AppendNull()
	} else {
		b.Field(1).(*array.StringBuilder).Append(*name)
	}
	return b.NewRecordBatch()
}

// partitionRows counts the rows of the table's files per partition value
// of column name ("<null>" for null).
func partitionRows(t *testing.T, cfg *Config) map[string]int64 {
	t.Helper()
	rows := map[string]int64{}
	for _, a := range snapshot(t, cfg).Files() {
		v := "<null>"
		if p := a.PartitionValues["name"]; p != nil {
			v = *p
		}
		rows[v] += statsRows(t, a)
	}
	return rows
}

// TestPartitionSpelledLikeNull: one stream writes one-row batches whose
// partition value is the string "__HIVE_DEFAULT_PARTITION__", null and
// "", in several orders. Every one of them is null in the log, as Spark
// and delta-rs write them (docs/delta.md), whatever came first. (Before,
// the three shared one open file keyed by its directory, whose partition
// value was its first row's: "" and null rows were committed as the
// literal string, or the string as null.)
func TestPartitionSpelledLikeNull(t *testing.T) {
	str := func(s string) *string { return &s }
	literal, empty := str(deltalayout.HiveDefaultPartition), str("")
	for _, order := range [][]*string{
		{literal, nil, empty, str("x"), nil, literal},
		{nil, literal, empty},
		{empty, literal, nil},
	} {
		c := newTC(t, memURI(t), func(cfg *Config) { cfg.PartitionBy = []string{"name"} })
		key := writers.AutoKey("s")
		var recs []arrow.RecordBatch
		want := map[string]int64{}
		for i, v := range order {
			recs = append(recs, c.nameRow(int64(i), v))
			if v == nil || *v == "" || *v == deltalayout.HiveDefaultPartition {
				want["<null>"]++
			} else {
				want[*v]++
			}
		}
		c.put(key, recs...)
		if got := partitionRows(t, c.cfg); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("order %v: rows per partition value %v, want %v", show(order), got, want)
		}
	}
}

func show(vs []*string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = "null"
		if v != nil {
			out[i] = fmt.Sprintf("%q", *v)
		}
	}
	return out
}

// TestOptimizeKeepsPartitionValuesApart: files whose partition values
// differ but whose directory names are the same (null, and the string
// "__HIVE_DEFAULT_PARTITION__" that another writer put in the log) are
// compacted apart: optimize changes no row's partition value. (Before,
// it grouped files by directory and gave every compacted row the first
// file's values, in a commit saying dataChange false.)
func TestOptimizeKeepsPartitionValuesApart(t *testing.T) {
	ctx := context.Background()
	c := newTC(t, fileURI(t), func(cfg *Config) { cfg.PartitionBy = []string{"name"} })
	x := "x"
	for i := range 4 {
		v := &x // becomes the literal below
		if i%2 == 1 {
			v = nil
		}
		c.put(writers.AutoKey("s"), c.nameRow(int64(i), v))
	}
	// Spell "x" as another writer could: the string
	// __HIVE_DEFAULT_PARTITION__ in partitionValues.
	root := strings.TrimPrefix(c.cfg.TableURI, "file://")
	logs, err := filepath.Glob(filepath.Join(root, "_delta_log", "*.json"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("commits: %v %v", logs, err)
	}
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.ReplaceAll(string(b), `"partitionValues":{"name":"x"}`, `"partitionValues":{"name":"`+deltalayout.HiveDefaultPartition+`"}`))
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int64{deltalayout.HiveDefaultPartition: 2, "<null>": 2}
	if got := partitionRows(t, c.cfg); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("setup: rows per partition value %v, want %v", got, want)
	}
	w := openWriter(t, c.cfg, c.mem) // reads the edited log afresh
	res, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: 128 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesRemoved != 4 || res.FilesAdded != 2 {
		t.Errorf("optimize %+v: want 4 files compacted into 2, one per partition value", res)
	}
	if got := partitionRows(t, c.cfg); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after optimize: rows per partition value %v, want %v", got, want)
	}
}

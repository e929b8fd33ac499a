package lance

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quiver-ingest/quiver/writers"
)

// TestMetrics: rows, files and bytes of finished data files, the dataset
// version, and commits by result reach the Registerer.
func TestMetrics(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	_, dir := dbDir(t, "items")
	reg := prometheus.NewRegistry()
	cfg := NewConfig()
	cfg.DatasetURI = "file://" + dir
	w, err := New(cfg, writers.Env{Endpoint: "items", Allocator: mem, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, writers.Env{Endpoint: "items", Allocator: mem, Registerer: reg}); err == nil {
		t.Fatal("a second writer registered the same metrics without an error")
	}
	if err := w.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	if got := testutil.ToFloat64(w.m.version); got != -1 {
		t.Fatalf("version before the dataset exists = %v, want -1", got)
	}

	r1, r2 := scenarioRows(mem, 0, 7), scenarioRows(mem, 7, 10)
	defer r1.Release()
	defer r2.Release()
	key := writers.TxnKey{Writer: "job", Epoch: 1}
	commitRows(t, w, key, r1)
	commitRows(t, w, writers.TxnKey{Writer: "job", Epoch: 2}, r2)
	if info := commitRows(t, w, key, r1); !info.Replayed {
		t.Fatalf("epoch 1 again: %+v, want replayed", info)
	}
	if _, err := w.Commit(ctx, writers.TxnKey{Writer: "job", Epoch: 9}, []writers.Descriptor{[]byte(`{}`)}); err == nil {
		t.Fatal("a foreign descriptor committed")
	}

	var size int64
	files, _ := filepath.Glob(filepath.Join(dir, "data", "*.lance"))
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		size += st.Size()
	}
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"rows", testutil.ToFloat64(w.m.rowsWritten), 17},
		{"files", testutil.ToFloat64(w.m.filesWritten), 3},
		{"bytes", testutil.ToFloat64(w.m.bytesWritten), float64(size)},
		{"version", testutil.ToFloat64(w.m.version), 2},
		{"committed", testutil.ToFloat64(w.m.commits.WithLabelValues("committed")), 2},
		{"replayed", testutil.ToFloat64(w.m.commits.WithLabelValues("replayed")), 1},
		{"rebases", testutil.ToFloat64(w.m.rebases), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Fatalf("%s = %v, want %v", c.name, c.got, c.want)
			}
		})
	}
	names := metricNames(t, reg)
	for _, want := range []string{"quiver_lance_rows_written_total", "quiver_lance_files_written_total", "quiver_lance_bytes_written_total",
		"quiver_lance_dataset_version", "quiver_lance_commits_total", "quiver_lance_commit_rebases_total", "quiver_lance_commit_conflicts_total"} {
		if !slices.Contains(names, want) {
			t.Fatalf("registry lacks %s: %v", want, names)
		}
	}
}

func metricNames(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	return names
}

package server

import (
	"path/filepath"
	"slices"
	"testing"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/internal/testpoll"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// TestBackgroundMaintenance: with maintenance.optimize_every: 3 the third
// commit of a Delta endpoint triggers optimize (then vacuum) in the
// background: the table ends up with one file holding every row, and the
// run shows in quiver_maintenance_runs_total.
func TestBackgroundMaintenance(t *testing.T) {
	dir := t.TempDir()
	s := startServerIn(t, dir, `endpoints:
  - name: events
    sink: delta
    delta: {table_uri: "file://tables/events"}
    maintenance: {optimize_every: 3}
`)
	c, err := quiver.Dial(s.FlightAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for range 3 {
		if _, err := c.Put(t.Context(), "events", idReader(t, 10)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := storage.Open(t.Context(), "file://"+filepath.Join(dir, "tables/events"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	testpoll.Until(t, "the background optimize", func() bool {
		snap, err := deltalog.Load(t.Context(), b)
		return err == nil && snap.NumFiles() == 1 && snap.Version == 3
	})
	labels := map[string]string{"endpoint": "events", "op": "optimize", "result": "ok"}
	testpoll.Until(t, "quiver_maintenance_runs_total", func() bool { return metricValue(t, s.reg, "quiver_maintenance_runs_total", labels) == 1 })
	if rows, _ := mustLoad(t, b).NumRecords(); rows != 30 {
		t.Fatalf("rows after the background optimize: %d, want 30", rows)
	}
}

func mustLoad(t *testing.T, b *storage.Bucket) *deltalog.Snapshot {
	t.Helper()
	snap, err := deltalog.Load(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestBackgroundMaintenanceLance: a Lance endpoint supports optimize and
// vacuum: the endpoints action says so, and background maintenance
// compacts the fragments of two puts, then vacuums, without failures.
func TestBackgroundMaintenanceLance(t *testing.T) {
	s := startServerIn(t, t.TempDir(), `endpoints:
  - name: items
    sink: lance
    lance: {dataset_uri: "file://tables/items"}
    maintenance: {optimize_every: 1}
`)
	c, err := quiver.Dial(s.FlightAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	eps, err := c.Endpoints(t.Context())
	if err != nil || len(eps) != 1 || !slices.Equal(eps[0].Maintenance, []string{"optimize", "vacuum"}) {
		t.Fatalf("endpoints = %+v, %v; want maintenance [optimize vacuum]", eps, err)
	}
	for range 2 {
		if _, err := c.Put(t.Context(), "items", idReader(t, 10)); err != nil {
			t.Fatal(err)
		}
	}
	removed := map[string]string{"endpoint": "items", "op": "optimize", "kind": "removed"}
	testpoll.Until(t, "the background optimize", func() bool { return metricValue(t, s.reg, "quiver_maintenance_files_total", removed) == 2 })
	vacuumed := map[string]string{"endpoint": "items", "op": "vacuum", "result": "ok"}
	testpoll.Until(t, "the background vacuum", func() bool { return metricValue(t, s.reg, "quiver_maintenance_runs_total", vacuumed) >= 1 })
	for _, op := range []string{"optimize", "vacuum"} {
		if n := metricValue(t, s.reg, "quiver_maintenance_runs_total", map[string]string{"endpoint": "items", "op": op, "result": "failed"}); n > 0 {
			t.Errorf("quiver_maintenance_runs_total{op=%s,result=failed} = %v, want none", op, n)
		}
	}
}

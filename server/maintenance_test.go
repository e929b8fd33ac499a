package server

import (
	"path/filepath"
	"testing"

	quiver "github.com/quiver-ingest/quiver/clients/go"
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
	poll(t, "the background optimize", func() bool {
		snap, err := deltalog.Load(t.Context(), b)
		return err == nil && snap.NumFiles() == 1 && snap.Version == 3
	})
	labels := map[string]string{"endpoint": "events", "op": "optimize", "result": "ok"}
	poll(t, "quiver_maintenance_runs_total", func() bool { return metricValue(t, s.reg, "quiver_maintenance_runs_total", labels) == 1 })
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

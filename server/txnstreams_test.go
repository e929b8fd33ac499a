package server

import (
	"path/filepath"
	"sync"
	"testing"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// TestConcurrentStreamsOfOneTransaction: several streams of one
// transaction write to one Delta and one Lance endpoint at once; their
// batches take turns in the sink (which never sees Write of one key
// concurrent with itself: the race detector watches), and the commit
// publishes every row once.
func TestConcurrentStreamsOfOneTransaction(t *testing.T) {
	dir := t.TempDir()
	s := startServerIn(t, dir, `endpoints:
  - name: d
    sink: delta
    delta: {table_uri: "file://tables/d"}
  - name: l
    sink: lance
    lance: {dataset_uri: "file://tables/l"}
`)
	c := dialClient(t, s)
	tx := c.Txn("w", 1)
	const streams, puts, rows = 4, 5, 3000
	var wg sync.WaitGroup
	for i := range 2 * streams {
		endpoint := []string{"d", "l"}[i%2]
		wg.Go(func() {
			for range puts {
				if _, err := tx.Put(t.Context(), endpoint, idReader(t, rows)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	st, err := tx.Precommit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Participants {
		if p.Rows != streams*puts*rows {
			t.Errorf("endpoint %s precommitted %d rows, want %d", p.Endpoint, p.Rows, streams*puts*rows)
		}
	}
	if st, err := tx.Commit(t.Context(), nil); err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("commit: %+v, %v", st, err)
	}
	b, err := storage.Open(t.Context(), "file://"+filepath.Join(dir, "tables/d"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	snap, err := deltalog.Load(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	if n, complete := snap.NumRecords(); !complete || n != streams*puts*rows {
		t.Errorf("the Delta table has %d rows (complete stats %v), want %d", n, complete, streams*puts*rows)
	}
}

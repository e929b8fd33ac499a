package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	quiver "github.com/quiver-ingest/quiver/clients/go"
)

// upsertChangelog is the transaction of the upsert tests over a table
// seeded with ids [0, 1000): updates (one key twice), deletes (one of a
// key the table does not hold), inserts, and a key inserted then deleted.
func upsertChangelog() []change {
	var cs []change
	for id := int64(0); id < 50; id++ {
		cs = append(cs, change{id: id, v: fmt.Sprintf("upd-%d", id), op: "U"})
	}
	cs = append(cs, change{id: 7, v: "upd-7-again"})
	for id := int64(500); id < 530; id++ {
		cs = append(cs, change{id: id, op: "D"})
	}
	cs = append(cs, change{id: 5000, op: "D"})
	for id := int64(1000); id < 1100; id++ {
		cs = append(cs, change{id: id, v: fmt.Sprintf("new-%d", id), op: "I"})
	}
	return append(cs, change{id: 2000, v: "gone", op: "I"}, change{id: 2000, op: "D"})
}

// seedUpsertTable appends ids [0, 1000) to the table in two auto-commit
// streams (two commits, so the table has several files) and returns the
// model of the table.
func seedUpsertTable(t *testing.T, c *quiver.Client) map[int64]string {
	t.Helper()
	ctx := ctxT(t)
	var model map[int64]string
	for _, start := range []int64{0, 500} {
		seed := seedChanges(start, 500)
		if ack, err := c.Put(ctx, deltaEndpoint, changelog(t, seed)); err != nil || !ack.Committed {
			t.Fatalf("seed put: %+v, %v", ack, err)
		}
		model = applyChanges(model, seed)
	}
	return model
}

// TestDeltaUpsertKillAfterPrecommit: the real server is killed right
// after journaling the precommit of an upsert transaction, whose rewritten
// and new files (or deletion vectors) are written. The restarted server
// commits the descriptor; the table equals the model with the changelog
// applied exactly once, a second commit adds no version, and replaying the
// whole epoch from scratch (begin, put, precommit, commit: planned again
// against the merged table) adds none either.
func TestDeltaUpsertKillAfterPrecommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		dvs  bool
	}{{"copy-on-write", false}, {"deletion-vectors", true}} {
		t.Run(tc.name, func(t *testing.T) { testDeltaUpsertKillAfterPrecommit(t, tc.dvs) })
	}
}

func testDeltaUpsertKillAfterPrecommit(t *testing.T, dvs bool) {
	tableDir := filepath.Join(t.TempDir(), "events")
	endpoints := []string{deltaAppend(tableDir), deltaUpsert(tableDir)}
	if dvs {
		for i, e := range endpoints {
			endpoints[i] = strings.Replace(e, "delta: {", "delta: {deletion_vectors: true, ", 1)
		}
	}
	cfg := writeConfig(t, t.TempDir(), endpoints...)
	changes := upsertChangelog()
	var model map[int64]string
	var seeded deltaTable
	crashAfterPrecommit(t, cfg, func(c *quiver.Client) *quiver.Txn {
		model = seedUpsertTable(t, c)
		seeded = wantRows(t, tableDir, model)
		return putTxn(t, "cdc", 1, upsertEndpoint, changelog(t, changes))(c)
	})
	want := applyChanges(model, changes)
	if tab := readDelta(t, tableDir); tab.version != seeded.version {
		t.Fatalf("the precommit published version %d", tab.version)
	}

	p := startQuiver(t, cfg)
	c := dial(t, p)
	tx := c.Txn("cdc", 1)
	st := commitOK(t, tx, "commit after restart")
	if st.Replayed {
		t.Fatalf("commit after restart: %+v, want not replayed", st)
	}
	version := endpointVersion(t, st, upsertEndpoint)
	tab := wantRows(t, tableDir, want)
	if tab.version != version || version != seeded.version+1 {
		t.Fatalf("table at version %d, the commit answered %d, seeded at %d: want one new version", tab.version, version, seeded.version)
	}
	if epoch, ok := tab.snap.TxnVersion("cdc"); !ok || epoch != 1 {
		t.Fatalf("txn version of cdc = %d, %v; want 1", epoch, ok)
	}
	marked := 0
	for _, a := range tab.snap.Files() {
		if a.DeletionVector != nil {
			marked++
		}
	}
	if dvs != (marked > 0) {
		t.Fatalf("%d files carry a deletion vector, want some exactly when deletion_vectors is on (%v)", marked, dvs)
	}

	commitOK(t, tx, "second commit")
	if again := readDelta(t, tableDir); again.version != version {
		t.Fatalf("second commit moved the table from version %d to %d", version, again.version)
	}

	// The pipeline replays the epoch from scratch.
	wantReplayed(t, runEpoch(t, c, "cdc", 1, upsertEndpoint, changelog(t, changes)))
	if tab = wantRows(t, tableDir, want); tab.version != version {
		t.Fatalf("replaying the epoch moved the table from version %d to %d", version, tab.version)
	}
	wantContiguousLog(t, tableDir, version)
	wantCommittedEpoch(t, c, upsertEndpoint, "cdc", 1)
}

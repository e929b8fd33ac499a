package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quiver "github.com/quiver-ingest/quiver/clients/go"
)

// TestDeltaUpsertConcurrentAppend: over Flight, an append committed to the
// table between an upsert transaction's precommit and its commit appends a
// row with a key the upsert inserts. The upsert's commit is Aborted and
// publishes nothing (the table holds the seed and the append, each id
// once, never the upsert's row next to the appended one). The conflict
// aborts the transaction (a retried commit says so), and the pipeline
// begins the same epoch again and replays the changelog, planned against
// the table with the append.
func TestDeltaUpsertConcurrentAppend(t *testing.T) {
	ctx := ctxT(t)
	tableDir := filepath.Join(t.TempDir(), "events")
	p := startQuiver(t, writeConfig(t, t.TempDir(), deltaAppend(tableDir), deltaUpsert(tableDir)))
	c := dial(t, p)
	model := seedUpsertTable(t, c)
	changes := upsertChangelog()

	tx := c.Txn("cdc", 1)
	if _, err := tx.Put(ctx, upsertEndpoint, changelog(t, changes)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Precommit(ctx); err != nil {
		t.Fatal(err)
	}
	appended := []change{{id: 1050, v: "appended"}, {id: 3000, v: "appended"}}
	if ack, err := c.Put(ctx, deltaEndpoint, changelog(t, appended)); err != nil || !ack.Committed {
		t.Fatalf("concurrent append: %+v, %v", ack, err)
	}
	model = applyChanges(model, appended)
	before := wantRows(t, tableDir, model)

	_, err := tx.Commit(ctx, nil)
	if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "replay") {
		t.Fatalf("commit of the stale upsert: %v; want Aborted telling to replay", err)
	}
	if tab := wantRows(t, tableDir, model); tab.version != before.version {
		t.Fatalf("the aborted upsert published version %d", tab.version)
	}
	if st, err := tx.Status(ctx); err != nil || st.State != quiver.StateAborted {
		t.Fatalf("status after the conflict: %+v, %v; want aborted", st, err)
	}
	if _, err := tx.Commit(ctx, nil); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "begin it again") {
		t.Fatalf("retried commit: %v; want FailedPrecondition telling to begin again", err)
	}
	if _, ok := before.snap.TxnVersion("cdc"); ok {
		t.Fatal("the aborted upsert recorded its txn")
	}

	next, err := c.Begin(ctx, "cdc", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := next.Put(ctx, upsertEndpoint, changelog(t, changes)); err != nil {
		t.Fatal(err)
	}
	if _, err := next.Precommit(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := next.Commit(ctx, nil)
	if err != nil || st.State != quiver.StateCommitted || st.Replayed {
		t.Fatalf("replay of epoch 1: %+v, %v", st, err)
	}
	tab := wantRows(t, tableDir, applyChanges(model, changes))
	if v := endpointVersion(t, st, upsertEndpoint); tab.version != v || v != before.version+1 {
		t.Fatalf("table at version %d, commit answered %d, before %d: want one new version", tab.version, v, before.version)
	}
}

package e2e

import (
	"path/filepath"
	"testing"

	quiver "github.com/quiver-ingest/quiver/clients/go"
)

// commitVersion returns the Delta version a commit answered for the
// events endpoint.
func commitVersion(t *testing.T, st quiver.TxnStatus) int64 {
	t.Helper()
	ec, ok := st.Endpoints[deltaEndpoint]
	if !ok || ec.Version == nil {
		t.Fatalf("commit answered no version for %s: %+v", deltaEndpoint, st)
	}
	return *ec.Version
}

// TestDeltaKillAfterPrecommit: the server is killed right after journaling
// the precommit of a transaction whose Parquet files are written. The
// restarted server commits them; the table holds the rows exactly once, a
// second commit adds no version, and replaying the whole epoch from
// scratch (begin, put, precommit, commit) adds none either.
func TestDeltaKillAfterPrecommit(t *testing.T) {
	ctx := ctxT(t)
	tableDir := filepath.Join(t.TempDir(), "events")
	cfg := writeDeltaConfig(t, t.TempDir(), tableDir)

	p := startQuiver(t, cfg, "QUIVER_TEST_CRASH=after-precommit")
	tx := dial(t, p).Txn("job-a", 1)
	if _, err := tx.Put(ctx, deltaEndpoint, idRows(t, 0, totalRows)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Precommit(ctx); err == nil {
		t.Fatal("precommit answered, but the crash point should have killed the server first")
	}
	p.waitExit(t)

	p = startQuiver(t, cfg)
	c := dial(t, p)
	tx = c.Txn("job-a", 1)
	st, err := tx.Commit(ctx, nil)
	if err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("commit after restart: %+v, %v", st, err)
	}
	version := commitVersion(t, st)
	tab := readDelta(t, tableDir)
	tab.wantIDs(t, totalRows)
	if tab.version != version {
		t.Fatalf("table at version %d, the commit answered %d", tab.version, version)
	}
	if epoch, ok := tab.snap.TxnVersion("job-a"); !ok || epoch != 1 {
		t.Fatalf("txn version of job-a = %d, %v; want 1", epoch, ok)
	}

	st, err = tx.Commit(ctx, nil)
	if err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("second commit: %+v, %v", st, err)
	}
	if again := readDelta(t, tableDir); again.version != version {
		t.Fatalf("second commit moved the table from version %d to %d", version, again.version)
	}

	// The pipeline replays the epoch from scratch.
	tx, err = c.Begin(ctx, "job-a", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Put(ctx, deltaEndpoint, idRows(t, 0, totalRows)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Precommit(ctx); err != nil {
		t.Fatal(err)
	}
	st, err = tx.Commit(ctx, nil)
	if err != nil || st.State != quiver.StateCommitted || !st.Replayed {
		t.Fatalf("replayed epoch: %+v, %v; want committed and replayed", st, err)
	}
	tab = readDelta(t, tableDir)
	if tab.version != version {
		t.Fatalf("replaying the epoch moved the table from version %d to %d", version, tab.version)
	}
	tab.wantIDs(t, totalRows)
	epoch, ok, err := c.CommittedEpoch(ctx, deltaEndpoint, "job-a")
	if err != nil || !ok || epoch != 1 {
		t.Fatalf("committed-epoch = %d, %v, %v; want 1", epoch, ok, err)
	}
}

// TestDeltaKillAfterCommitDecision: the server dies after journaling the
// commit decision, before the Delta commit. Recovery writes it, once; the
// client's retried commit changes nothing.
func TestDeltaKillAfterCommitDecision(t *testing.T) {
	ctx := ctxT(t)
	tableDir := filepath.Join(t.TempDir(), "events")
	cfg := writeDeltaConfig(t, t.TempDir(), tableDir)

	p := startQuiver(t, cfg, "QUIVER_TEST_CRASH=after-commit-decision")
	tx := dial(t, p).Txn("job-b", 7)
	if _, err := tx.Put(ctx, deltaEndpoint, idRows(t, 0, totalRows)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Precommit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx, nil); err == nil {
		t.Fatal("commit answered, but the crash point should have killed the server first")
	}
	p.waitExit(t)

	p = startQuiver(t, cfg)
	st, err := dial(t, p).Txn("job-b", 7).Commit(ctx, nil)
	if err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("retried commit: %+v, %v", st, err)
	}
	tab := readDelta(t, tableDir)
	tab.wantIDs(t, totalRows)
	if epoch, ok := tab.snap.TxnVersion("job-b"); !ok || epoch != 7 {
		t.Fatalf("txn version of job-b = %d, %v; want 7", epoch, ok)
	}
	wantContiguousLog(t, tableDir, tab.version)
}

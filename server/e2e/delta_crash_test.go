package e2e

import (
	"path/filepath"
	"testing"
)

// TestDeltaKillAfterPrecommit: the server is killed right after journaling
// the precommit of a transaction whose Parquet files are written. The
// restarted server commits them; the table holds the rows exactly once, a
// second commit adds no version, and replaying the whole epoch from
// scratch (begin, put, precommit, commit) adds none either.
func TestDeltaKillAfterPrecommit(t *testing.T) {
	tableDir := filepath.Join(t.TempDir(), "events")
	cfg := writeConfig(t, t.TempDir(), deltaAppend(tableDir))
	crashAfterPrecommit(t, cfg, putTxn(t, "job-a", 1, deltaEndpoint, idRows(t, 0, totalRows)))

	p := startQuiver(t, cfg)
	c := dial(t, p)
	tx := c.Txn("job-a", 1)
	version := endpointVersion(t, commitOK(t, tx, "commit after restart"), deltaEndpoint)
	tab := readDelta(t, tableDir)
	tab.wantIDs(t, totalRows)
	if tab.version != version {
		t.Fatalf("table at version %d, the commit answered %d", tab.version, version)
	}
	if epoch, ok := tab.snap.TxnVersion("job-a"); !ok || epoch != 1 {
		t.Fatalf("txn version of job-a = %d, %v; want 1", epoch, ok)
	}

	commitOK(t, tx, "second commit")
	if again := readDelta(t, tableDir); again.version != version {
		t.Fatalf("second commit moved the table from version %d to %d", version, again.version)
	}

	// The pipeline replays the epoch from scratch.
	wantReplayed(t, runEpoch(t, c, "job-a", 1, deltaEndpoint, idRows(t, 0, totalRows)))
	tab = readDelta(t, tableDir)
	if tab.version != version {
		t.Fatalf("replaying the epoch moved the table from version %d to %d", version, tab.version)
	}
	tab.wantIDs(t, totalRows)
	wantCommittedEpoch(t, c, deltaEndpoint, "job-a", 1)
}

// TestDeltaKillAfterCommitDecision: the server dies after journaling the
// commit decision, before the Delta commit. Recovery writes it, once; the
// client's retried commit changes nothing.
func TestDeltaKillAfterCommitDecision(t *testing.T) {
	tableDir := filepath.Join(t.TempDir(), "events")
	cfg := writeConfig(t, t.TempDir(), deltaAppend(tableDir))
	crashAfterCommitDecision(t, cfg, putTxn(t, "job-b", 7, deltaEndpoint, idRows(t, 0, totalRows)))

	p := startQuiver(t, cfg)
	commitOK(t, dial(t, p).Txn("job-b", 7), "retried commit")
	tab := readDelta(t, tableDir)
	tab.wantIDs(t, totalRows)
	if epoch, ok := tab.snap.TxnVersion("job-b"); !ok || epoch != 7 {
		t.Fatalf("txn version of job-b = %d, %v; want 7", epoch, ok)
	}
	wantContiguousLog(t, tableDir, tab.version)
}

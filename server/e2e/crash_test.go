package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	quiver "github.com/quiver-ingest/quiver/clients/go"
)

const (
	batchRows = 1000
	batches   = 3
	totalRows = batchRows * batches
)

// committedRows is the discard sink's committed-row counter of endpoint
// devnull, as the server exports it.
const committedRows = `quiver_discard_committed_rows_total{endpoint="devnull"}`

// rows returns a reader of the totalRows rows of one int64 column id,
// 0 to totalRows-1, in batches of 1000 (idRows).
func rows(t *testing.T) array.RecordReader {
	t.Helper()
	return idRows(t, 0, totalRows)
}

func dial(t testing.TB, p *proc) *quiver.Client {
	t.Helper()
	c, err := quiver.Dial(p.flightURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantMetric(t *testing.T, p *proc, name string, want float64) {
	t.Helper()
	if got := p.metric(t, name); got != want {
		t.Fatalf("%s = %v, want %v", name, got, want)
	}
}

// TestKillAfterPrecommit: the server dies right after journaling the
// precommit (before answering). The restarted server still holds the
// transaction precommitted; committing it publishes the rows exactly once,
// and neither a second commit nor a further restart publishes them again.
func TestKillAfterPrecommit(t *testing.T) {
	ctx := ctxT(t)
	dataDir := t.TempDir()
	cfg := writeConfig(t, dataDir, devnullEndpoint)
	crashAfterPrecommit(t, cfg, putTxn(t, "job-a", 1, "devnull", rows(t)))

	p := startQuiver(t, cfg)
	tx := dial(t, p).Txn("job-a", 1)
	st, err := tx.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != quiver.StatePrecommitted || len(st.Participants) != 1 || st.Participants[0].Rows != totalRows {
		t.Fatalf("after restart: status %+v, want precommitted with one participant of %d rows", st, totalRows)
	}
	wantMetric(t, p, committedRows, 0)
	for i := range 2 {
		commitOK(t, tx, fmt.Sprintf("commit %d", i))
	}
	wantMetric(t, p, committedRows, totalRows)
	p.kill()

	// A third life: the journal says committed, so nothing is published
	// again, and the client's retry still answers committed.
	p = startQuiver(t, cfg)
	commitOK(t, dial(t, p).Txn("job-a", 1), "commit after second restart")
	wantMetric(t, p, committedRows, 0)
}

// TestKillAfterCommitDecision: the server dies after journaling the commit
// decision, before any sink commit. Restarting finishes the commit by
// itself, exactly once; the client's retried commit answers committed and
// publishes nothing more.
func TestKillAfterCommitDecision(t *testing.T) {
	cfg := writeConfig(t, t.TempDir(), devnullEndpoint)
	crashAfterCommitDecision(t, cfg, putTxn(t, "job-b", 7, "devnull", rows(t)))

	p := startQuiver(t, cfg)
	wantMetric(t, p, committedRows, totalRows) // recovery finished the commit
	commitOK(t, dial(t, p).Txn("job-b", 7), "retried commit")
	wantMetric(t, p, committedRows, totalRows)
}

// TestKillWhileOpen: SIGKILL while a transaction is open (rows staged, no
// precommit). The restarted server aborts it; the pipeline replays the
// epoch and its rows land once.
func TestKillWhileOpen(t *testing.T) {
	ctx := ctxT(t)
	dataDir := t.TempDir()
	cfg := writeConfig(t, dataDir, devnullEndpoint)

	p := startQuiver(t, cfg)
	tx := dial(t, p).Txn("job-c", 3)
	if _, err := tx.Put(ctx, "devnull", rows(t)); err != nil {
		t.Fatal(err)
	}
	p.kill()

	p = startQuiver(t, cfg)
	tx = dial(t, p).Txn("job-c", 3)
	st, err := tx.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != quiver.StateAborted {
		t.Fatalf("after restart: state %s, want aborted", st.State)
	}
	// Replay the same epoch: begin starts an aborted epoch afresh (a bare
	// DoPut may not, so that a late stream of the dead attempt cannot).
	runEpoch(t, dial(t, p), "job-c", 3, "devnull", rows(t))
	wantMetric(t, p, committedRows, totalRows)
}

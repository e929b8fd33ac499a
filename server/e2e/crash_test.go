package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

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

// rows returns a reader of batches × batchRows rows of one int64 column.
func rows(t *testing.T) array.RecordReader {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	recs := make([]arrow.RecordBatch, batches)
	for i := range recs {
		ids := b.Field(0).(*array.Int64Builder)
		for j := range batchRows {
			ids.Append(int64(i*batchRows + j))
		}
		recs[i] = b.NewRecordBatch()
	}
	r, err := array.NewRecordReader(schema, recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		rec.Release()
	}
	t.Cleanup(r.Release)
	return r
}

func dial(t *testing.T, p *proc) *quiver.Client {
	t.Helper()
	c, err := quiver.Dial(p.flightURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
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
	cfg := writeConfig(t, dataDir, "devnull")

	p := startQuiver(t, cfg, "QUIVER_TEST_CRASH=after-precommit")
	tx := dial(t, p).Txn("job-a", 1)
	if _, err := tx.Put(ctx, "devnull", rows(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Precommit(ctx); err == nil {
		t.Fatal("precommit answered, but the crash point should have killed the server first")
	}
	p.waitExit(t)

	p = startQuiver(t, cfg)
	tx = dial(t, p).Txn("job-a", 1)
	st, err := tx.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != quiver.StatePrecommitted || len(st.Participants) != 1 || st.Participants[0].Rows != totalRows {
		t.Fatalf("after restart: status %+v, want precommitted with one participant of %d rows", st, totalRows)
	}
	wantMetric(t, p, committedRows, 0)
	for i := range 2 {
		st, err := tx.Commit(ctx, nil)
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		if st.State != quiver.StateCommitted {
			t.Fatalf("commit %d: state %s", i, st.State)
		}
	}
	wantMetric(t, p, committedRows, totalRows)
	p.kill()

	// A third life: the journal says committed, so nothing is published
	// again, and the client's retry still answers committed.
	p = startQuiver(t, cfg)
	st, err = dial(t, p).Txn("job-a", 1).Commit(ctx, nil)
	if err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("commit after second restart: %+v, %v", st, err)
	}
	wantMetric(t, p, committedRows, 0)
}

// TestKillAfterCommitDecision: the server dies after journaling the commit
// decision, before any sink commit. Restarting finishes the commit by
// itself, exactly once; the client's retried commit answers committed and
// publishes nothing more.
func TestKillAfterCommitDecision(t *testing.T) {
	ctx := ctxT(t)
	dataDir := t.TempDir()
	cfg := writeConfig(t, dataDir, "devnull")

	p := startQuiver(t, cfg, "QUIVER_TEST_CRASH=after-commit-decision")
	tx := dial(t, p).Txn("job-b", 7)
	if _, err := tx.Put(ctx, "devnull", rows(t)); err != nil {
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
	wantMetric(t, p, committedRows, totalRows) // recovery finished the commit
	st, err := dial(t, p).Txn("job-b", 7).Commit(ctx, nil)
	if err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("retried commit: %+v, %v", st, err)
	}
	wantMetric(t, p, committedRows, totalRows)
}

// TestKillWhileOpen: SIGKILL while a transaction is open (rows staged, no
// precommit). The restarted server aborts it; the pipeline replays the
// epoch and its rows land once.
func TestKillWhileOpen(t *testing.T) {
	ctx := ctxT(t)
	dataDir := t.TempDir()
	cfg := writeConfig(t, dataDir, "devnull")

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
	tx, err = dial(t, p).Begin(ctx, "job-c", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Put(ctx, "devnull", rows(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Precommit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	wantMetric(t, p, committedRows, totalRows)
}

package server

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/internal/testpoll"
)

// A descriptor handed over and published by another server's commit must
// survive the fence of the attempt that precommitted it: a job replays
// the epoch after a crash that came after the commit with a plain begin,
// on the server whose share was published elsewhere. That server still
// holds its attempt precommitted (nothing told it the commit happened),
// so the begin fences it, or the attempt merely expires (txn.ttl); either
// way a rollback must leave precommitted files alone, or the committed
// table version references deleted files. (A rollback that deleted them,
// to stop stale descriptors, lost committed data exactly so.)
func TestFenceAfterHandedCommitKeepsPublishedFiles(t *testing.T) {
	first, second, table := twoServersOneTable(t)
	fromSecond := precommitJob(t, dialClient(t, second), 7)
	precommitJob(t, dialClient(t, first), 5)
	if st, err := dialClient(t, first).Txn("job", 1).Commit(t.Context(), map[string][][]byte{"events": {fromSecond}}); err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("commit with the second server's descriptor: %+v %v", st, err)
	}
	files, _ := filepath.Glob(filepath.Join(table, "*.parquet"))
	if len(files) != 2 {
		t.Fatalf("data files after the commit %v, want 2", files)
	}
	// The job crashed after the commit, before committing (replaying) the
	// second server's share; it replays the epoch with a plain begin.
	if _, err := dialClient(t, second).Begin(t.Context(), "job", 1, 0); err != nil {
		t.Logf("begin on the second server: %v", err)
	}
	after, _ := filepath.Glob(filepath.Join(table, "*.parquet"))
	if len(after) != 2 {
		t.Fatalf("data files of the committed version after a begin on the server whose share was handed over: %v, want both of %v: a committed row was deleted", after, files)
	}
}

// The same without any client action: the second server's precommitted
// attempt, whose descriptor the first server published, expires at its
// ttl (15 minutes by default; 2 s here) and the expiry's rollback deletes
// the published data file.
func TestExpiryAfterHandedCommitKeepsPublishedFiles(t *testing.T) {
	first, second, table := twoServersOneTable(t)
	tx, err := dialClient(t, second).Begin(t.Context(), "job", 1, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Put(t.Context(), "events", idReader(t, 7)); err != nil {
		t.Fatal(err)
	}
	pre, err := tx.Precommit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	own := dialClient(t, first).Txn("job", 1)
	if _, err := own.Put(t.Context(), "events", idReader(t, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := own.Precommit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st, err := own.Commit(t.Context(), map[string][][]byte{"events": {pre.Participants[0].Descriptor}}); err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("commit with the second server's descriptor: %+v %v", st, err)
	}
	files, _ := filepath.Glob(filepath.Join(table, "*.parquet"))
	if len(files) != 2 {
		t.Fatalf("data files after the commit %v, want 2", files)
	}
	testpoll.Until(t, "the second server's precommitted attempt to expire", func() bool {
		st, err := tx.Status(t.Context())
		return err == nil && st.State == quiver.StateAborted
	})
	after, _ := filepath.Glob(filepath.Join(table, "*.parquet"))
	if len(after) != 2 {
		t.Fatalf("data files of the committed version after the second server's precommitted attempt expired: %v, want both of %v", after, files)
	}
}

// TestHandedDescriptorOfARolledBackAttemptIsRefused: two servers share a
// descriptor key and a table; the second precommits (job, 1) and rolls it
// back; the first server's commit of (job, 1) with the second's stale
// descriptor is refused (FailedPrecondition naming the attempt) and
// publishes nothing: the rollback marked the attempt fenced in the table.
// Before, the first server answered committed and published the
// rolled-back rows.
func TestHandedDescriptorOfARolledBackAttemptIsRefused(t *testing.T) {
	first, second, table := twoServersOneTable(t)
	b := dialClient(t, second).Txn("job", 1)
	if _, err := b.Put(t.Context(), "events", idReader(t, 7)); err != nil {
		t.Fatal(err)
	}
	pre, err := b.Precommit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	stale := map[string][][]byte{"events": {pre.Participants[0].Descriptor}}
	_, err = dialClient(t, first).Txn("job", 1).Commit(t.Context(), stale)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), pre.Attempt) {
		t.Fatalf("commit of a rolled-back attempt's descriptor on another server: %v, want FailedPrecondition naming attempt %s", err, pre.Attempt)
	}
	if logs, _ := filepath.Glob(filepath.Join(table, "_delta_log", "*.json")); len(logs) != 0 {
		t.Fatalf("commits %v: the rolled-back rows were published", logs)
	}
}

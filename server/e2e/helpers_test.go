package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	quiver "github.com/quiver-ingest/quiver/clients/go"
)

// devnullEndpoint is a discard endpoint called devnull, for writeConfig.
const devnullEndpoint = "{name: devnull, sink: discard}"

// writeConfig writes a config with free ports, dataDir and one endpoint
// per YAML flow mapping in endpoints, returning its path. dataDir is
// shared across restarts.
func writeConfig(t testing.TB, dataDir string, endpoints ...string) string {
	t.Helper()
	return writeConfigWith(t, dataDir, "", endpoints...)
}

// writeConfigWith is writeConfig with extra top-level YAML lines (each
// ending in a newline) before the endpoints.
func writeConfigWith(t testing.TB, dataDir, extra string, endpoints ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nhttp_listen: 127.0.0.1:0\ndata_dir: %s\n%sendpoints:\n", dataDir, extra)
	for _, e := range endpoints {
		fmt.Fprintf(&b, "  - %s\n", e)
	}
	path := filepath.Join(t.TempDir(), "quiver.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// rootURI returns the URI of a table root given as a local folder, or
// root itself when it is a URI already (s3://... on an emulator).
func rootURI(root string) string {
	if strings.Contains(root, "://") {
		return root
	}
	return "file://" + root
}

// stageFunc opens a transaction on c and stages its rows, returning it.
type stageFunc func(c *quiver.Client) *quiver.Txn

// putTxn returns a stageFunc that puts r to endpoint in the transaction
// (writer, epoch).
func putTxn(t *testing.T, writer string, epoch int64, endpoint string, r array.RecordReader) stageFunc {
	return func(c *quiver.Client) *quiver.Txn {
		t.Helper()
		tx := c.Txn(writer, epoch)
		if _, err := tx.Put(ctxT(t), endpoint, r); err != nil {
			t.Fatal(err)
		}
		return tx
	}
}

// crashAfterPrecommit starts quiver on cfg with the after-precommit crash
// point, stages a transaction on it and checks that the server dies when
// journaling the precommit, before answering it.
func crashAfterPrecommit(t *testing.T, cfg string, stage stageFunc) {
	t.Helper()
	p := startQuiver(t, cfg, "QUIVER_TEST_CRASH=after-precommit")
	tx := stage(dial(t, p))
	if _, err := tx.Precommit(ctxT(t)); err == nil {
		t.Fatal("precommit answered, but the crash point should have killed the server first")
	}
	p.waitExit(t)
}

// crashAfterCommitDecision starts quiver on cfg with the
// after-commit-decision crash point, stages and precommits a transaction
// on it, and checks that the server dies when journaling the commit
// decision, before answering the commit.
func crashAfterCommitDecision(t *testing.T, cfg string, stage stageFunc) {
	t.Helper()
	ctx := ctxT(t)
	p := startQuiver(t, cfg, "QUIVER_TEST_CRASH=after-commit-decision")
	tx := stage(dial(t, p))
	if _, err := tx.Precommit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx, nil); err == nil {
		t.Fatal("commit answered, but the crash point should have killed the server first")
	}
	p.waitExit(t)
}

// commitOK commits tx and fails the test unless it answers committed;
// what names the commit in the failure.
func commitOK(t *testing.T, tx *quiver.Txn, what string) quiver.TxnStatus {
	t.Helper()
	st, err := tx.Commit(ctxT(t), nil)
	if err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("%s: %+v, %v", what, st, err)
	}
	return st
}

// runEpoch begins the epoch (writer, epoch) afresh, as a pipeline
// replaying it does, puts r to endpoint, precommits and commits, failing
// the test unless the commit answers committed. The caller checks
// st.Replayed.
func runEpoch(t *testing.T, c *quiver.Client, writer string, epoch int64, endpoint string, r array.RecordReader) quiver.TxnStatus {
	t.Helper()
	ctx := ctxT(t)
	tx, err := c.Begin(ctx, writer, epoch, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Put(ctx, endpoint, r); err != nil {
		t.Fatal(err)
	}
	return precommitCommit(t, tx, fmt.Sprintf("epoch %d of %s", epoch, writer))
}

// precommitCommit precommits and commits tx, failing the test unless the
// commit answers committed; what names the commit in the failure.
func precommitCommit(t *testing.T, tx *quiver.Txn, what string) quiver.TxnStatus {
	t.Helper()
	if _, err := tx.Precommit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return commitOK(t, tx, what)
}

// wantReplayed fails the test unless st answers a replayed epoch.
func wantReplayed(t *testing.T, st quiver.TxnStatus) {
	t.Helper()
	if !st.Replayed {
		t.Fatalf("replayed epoch: %+v; want committed and replayed", st)
	}
}

// wantCommittedEpoch fails the test unless endpoint reports epoch as the
// last committed one of writer.
func wantCommittedEpoch(t *testing.T, c *quiver.Client, endpoint, writer string, epoch int64) {
	t.Helper()
	got, ok, err := c.CommittedEpoch(ctxT(t), endpoint, writer)
	if err != nil || !ok || got != epoch {
		t.Fatalf("committed-epoch of %s on %s = %d, %v, %v; want %d", writer, endpoint, got, ok, err, epoch)
	}
}

// endpointVersion returns the table version a commit answered for
// endpoint.
func endpointVersion(t *testing.T, st quiver.TxnStatus, endpoint string) int64 {
	t.Helper()
	ec, ok := st.Endpoints[endpoint]
	if !ok || ec.Version == nil {
		t.Fatalf("commit answered no version for %s: %+v", endpoint, st)
	}
	return *ec.Version
}

// wantIDRange checks that ids (sorted) are exactly [0, n), once each;
// what names the table in the failure.
func wantIDRange(t testing.TB, what string, ids []int64, n int64) {
	t.Helper()
	if int64(len(ids)) != n {
		t.Fatalf("%s holds %d rows, want %d", what, len(ids), n)
	}
	for i, id := range ids {
		if id != int64(i) {
			t.Fatalf("%s rows: id %d at position %d: rows missing or duplicated", what, id, i)
		}
	}
}

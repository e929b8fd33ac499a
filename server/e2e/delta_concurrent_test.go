package e2e

import (
	"fmt"
	"path/filepath"
	"testing"

	"golang.org/x/sync/errgroup"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// TestDeltaTwoServersAppend: two quiver processes append to one file://
// table at the same time, with auto-commit streams and transactions. Every
// row lands exactly once, the log's versions are contiguous (one per
// commit, plus the table's creation), and the lost commit races were
// resolved by retrying.
func TestDeltaTwoServersAppend(t *testing.T) {
	const (
		servers  = 2
		autoPuts = 4 // per server
		txns     = 3 // per server
		putRows  = 500
	)
	ctx := ctxT(t)
	tableDir := filepath.Join(t.TempDir(), "events")
	clients := make([]*quiver.Client, servers)
	procs := make([]*proc, servers)
	for i := range servers {
		procs[i] = startQuiver(t, writeConfig(t, t.TempDir(), deltaAppend(tableDir)))
		clients[i] = dial(t, procs[i])
	}

	var g errgroup.Group
	next := int64(0)
	for i, c := range clients {
		for range autoPuts {
			start := next
			next += putRows
			rows := idRows(t, start, putRows)
			g.Go(func() error {
				ack, err := c.Put(ctx, deltaEndpoint, rows)
				if err == nil && (!ack.Committed || ack.Rows != putRows) {
					err = fmt.Errorf("auto-commit put: ack %+v", ack)
				}
				return err
			})
		}
		writer := fmt.Sprintf("pipeline-%d", i)
		var starts []int64
		for range txns {
			starts = append(starts, next)
			next += putRows
		}
		readers := make([]func() error, 0, txns)
		for e, start := range starts {
			rows := idRows(t, start, putRows)
			readers = append(readers, func() error {
				tx := c.Txn(writer, int64(e+1))
				if _, err := tx.Put(ctx, deltaEndpoint, rows); err != nil {
					return fmt.Errorf("%s: put: %w", tx, err)
				}
				if _, err := tx.Precommit(ctx); err != nil {
					return fmt.Errorf("%s: precommit: %w", tx, err)
				}
				if st, err := tx.Commit(ctx, nil); err != nil || st.Replayed {
					return fmt.Errorf("%s: commit: %+v, %v", tx, st, err)
				}
				return nil
			})
		}
		// One writer's epochs run in order (a newer epoch fences older
		// open ones), concurrently with everything else.
		g.Go(func() error {
			for _, run := range readers {
				if err := run(); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	tab := readDelta(t, tableDir)
	tab.wantIDs(t, next)
	commits := int64(servers * (autoPuts + txns))
	// One version per commit; the first one (version 0) created the table.
	if tab.version != commits-1 {
		t.Fatalf("table at version %d, want %d (%d commits, the first creating the table)", tab.version, commits-1, commits)
	}
	wantContiguousLog(t, tableDir, tab.version)
	for i := range servers {
		if epoch, ok := tab.snap.TxnVersion(fmt.Sprintf("pipeline-%d", i)); !ok || epoch != txns {
			t.Errorf("txn version of pipeline-%d = %d, %v; want %d", i, epoch, ok, txns)
		}
	}
	// A commit that lost a race and was rebased records the version it
	// read, older than the one before it.
	rebased, store := 0, tab.store(t)
	for v := int64(1); v <= tab.version; v++ {
		actions, err := deltalog.ReadCommit(ctx, store, v)
		if err != nil {
			t.Fatal(err)
		}
		if ci := actions[0].CommitInfo; ci == nil || ci.ReadVersion == nil {
			t.Fatalf("version %d: the first action is not a commitInfo with readVersion", v)
		} else if *ci.ReadVersion < v-1 {
			rebased++
		}
	}
	t.Logf("%d commits, %d of them rebased after losing a race", commits, rebased)
	// Commits that lost the race to create the table (every stream's
	// first commit may race) are planned again on the winner's table:
	// retries, not rebases the log shows.
	var conflicts, retries float64
	for _, p := range procs {
		conflicts += max(0, p.metric(t, `quiver_delta_commit_conflicts_total{endpoint="events"}`))
		retries += max(0, p.metric(t, `quiver_delta_commit_retries_total{endpoint="events"}`))
	}
	if int(conflicts) != rebased+int(retries) {
		t.Errorf("the servers count %v commit conflicts and %v retries, the log shows %d rebased commits: want conflicts = rebased + retries", conflicts, retries, rebased)
	}
}

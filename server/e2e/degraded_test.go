package e2e

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/internal/reftool"
)

// pollFor calls cond until it holds, failing the test after d.
func pollFor(t *testing.T, p *proc, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-p.exited:
			t.Fatalf("quiver exited while waiting for %s:\n%s", what, p.output())
		case <-deadline:
			t.Fatalf("timed out after %s waiting for %s:\n%s", d, what, p.output())
		}
	}
}

// readyz returns /readyz's status code and body.
func (p *proc) readyz(t *testing.T) (int, string) {
	t.Helper()
	resp, err := http.Get(p.httpURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestDegradedDeltaEndpointFinishesDecidedCommit: the server dies after
// deciding a Delta commit, and the table's _delta_log then holds a corrupt
// commit file. The restarted server starts anyway: the other endpoint
// serves, the Delta endpoint answers FailedPrecondition with the reason,
// health, /readyz and quiver_endpoint_up report it, and the decided
// commit stays decided. Once the file is fixed the endpoint opens without
// a restart and the decided commit is published, once.
func TestDegradedDeltaEndpointFinishesDecidedCommit(t *testing.T) {
	ctx := ctxT(t)
	tableDir := filepath.Join(t.TempDir(), "events")
	cfg := writeConfig(t, t.TempDir(), devnullEndpoint, deltaAppend(tableDir))
	crashAfterCommitDecision(t, cfg, putTxn(t, "job-d", 3, deltaEndpoint, idRows(t, 0, totalRows)))

	corrupt := filepath.Join(tableDir, "_delta_log", "00000000000000000000.json")
	if err := os.MkdirAll(filepath.Dir(corrupt), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(corrupt, []byte("{\"add\": {\"path\": truncated\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startQuiver(t, cfg)
	c := dial(t, p)
	if ack, err := c.Put(ctx, "devnull", rows(t)); err != nil || ack.Rows != totalRows {
		t.Fatalf("put to devnull: %+v, %v", ack, err)
	}
	_, err := c.Put(ctx, deltaEndpoint, rows(t))
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "corrupt delta log") {
		t.Fatalf("put to the corrupt table: %v, want FailedPrecondition naming the corrupt log", err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Status != "degraded" || h.Endpoints["devnull"] != "ok" || !strings.Contains(h.Endpoints[deltaEndpoint], "corrupt delta log") {
		t.Fatalf("health: %+v, %v", h, err)
	}
	// Without a token /readyz says only ready or not ready.
	if code, body := p.readyz(t); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("/readyz = %d %q, want 200 ready", code, body)
	}
	wantMetric(t, p, `quiver_endpoint_up{endpoint="events"}`, 0)
	wantMetric(t, p, `quiver_endpoint_up{endpoint="devnull"}`, 1)
	tx := c.Txn("job-d", 3)
	if st, err := tx.Status(ctx); err != nil || st.State != quiver.StatePrecommitted {
		t.Fatalf("the decided transaction while its endpoint is down: %+v, %v; want precommitted (decided)", st, err)
	}

	if err := os.Remove(corrupt); err != nil {
		t.Fatal(err)
	}
	pollFor(t, p, 30*time.Second, "the decided commit to finish once the table is fixed", func() bool {
		st, err := tx.Status(ctx)
		return err == nil && st.State == quiver.StateCommitted
	})
	wantMetric(t, p, `quiver_endpoint_up{endpoint="events"}`, 1)
	tab := readDelta(t, tableDir)
	tab.wantIDs(t, totalRows)
	if epoch, ok := tab.snap.TxnVersion("job-d"); !ok || epoch != 3 {
		t.Fatalf("txn version of job-d = %d, %v; want 3", epoch, ok)
	}
	wantReplayed(t, commitOK(t, tx, "commit after recovery"))
	if h, err := c.Health(ctx); err != nil || h.Status != "ok" {
		t.Fatalf("health after recovery: %+v, %v", h, err)
	}
	if out := p.output(); !strings.Contains(out, "endpoint: the sink opened: serving") {
		t.Fatalf("no recovery line in the log:\n%s", out)
	}
}

// mountTmpfs mounts a tmpfs of size at a new folder and returns it,
// unmounted at cleanup (register it before anything using the folder).
// Without permission to mount the test is skipped, unless CI=true
// (reftool.Missing).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		reftool.Missing(t, "mount -t tmpfs (root)", fmt.Errorf("%v: %s", err, out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// TestJournalFullDisk: on a full data_dir transactions fail with
// Unavailable naming the cause, and health, /readyz, the metric and an
// ERROR line say so; once space is freed the journal recovers by itself,
// transactions work again without a restart, and what they journaled
// survives one.
func TestJournalFullDisk(t *testing.T) {
	ctx := ctxT(t)
	dataDir := mountTmpfs(t, "1m")
	cfg := writeConfig(t, dataDir, devnullEndpoint)
	p := startQuiver(t, cfg)
	c := dial(t, p)
	if _, err := c.Begin(ctx, "w", 0, 0); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dataDir, "filler")
	fill(t, filler)
	// The segment's last page still has room for a few records.
	var epoch int64
	for epoch = 1; ; epoch++ {
		_, err := c.Begin(ctx, "w", epoch, 0)
		if err == nil && epoch < 1000 {
			continue
		}
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "no space left on device") {
			t.Fatalf("begin %d on a full disk: %v, want Unavailable naming ENOSPC", epoch, err)
		}
		break
	}
	h, err := c.Health(ctx)
	if err != nil || h.Status != "degraded" || !strings.Contains(h.Journal, "no space left on device") {
		t.Fatalf("health on a full disk: %+v, %v", h, err)
	}
	if code, body := p.readyz(t); code != http.StatusServiceUnavailable || body != "not ready\n" {
		t.Fatalf("/readyz on a full disk = %d %q, want 503", code, body)
	}
	wantMetric(t, p, "quiver_journal_healthy", 0)
	if out := p.output(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "journal: cannot write") {
		t.Fatalf("no ERROR line for the journal:\n%s", out)
	}
	// Auto-commit streams do not need the journal.
	if _, err := c.Put(ctx, "devnull", rows(t)); err != nil {
		t.Fatalf("auto-commit put on a full disk: %v", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	pollFor(t, p, 30*time.Second, "the journal to report healthy once space is freed", func() bool {
		h, err := c.Health(ctx)
		return err == nil && h.Journal == "ok" && h.Status == "ok"
	})
	if code, _ := p.readyz(t); code != http.StatusOK {
		t.Fatalf("/readyz after recovery = %d", code)
	}
	wantMetric(t, p, "quiver_journal_healthy", 1)
	st := runEpoch(t, c, "w", epoch, "devnull", rows(t))
	if st.Replayed {
		t.Fatalf("epoch %d after recovery: %+v", epoch, st)
	}

	p.kill()
	p2 := startQuiver(t, cfg)
	if st, err := dial(t, p2).Txn("w", epoch).Status(ctx); err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("after a restart, epoch %d: %+v, %v; want committed", epoch, st, err)
	}
}

// TestJournalDirectoryRemoved: with data_dir/journal deleted under a
// running server, it stops taking transactions instead of acknowledging
// them into deleted files: precommit is Unavailable telling the operator
// to restart, health and /readyz report it, and it keeps refusing after a
// second server took the data_dir over.
func TestJournalDirectoryRemoved(t *testing.T) {
	ctx := ctxT(t)
	dataDir := t.TempDir()
	cfg := writeConfig(t, dataDir, devnullEndpoint)
	p := startQuiver(t, cfg)
	c := dial(t, p)
	tx := c.Txn("w", 1)
	if _, err := tx.Put(ctx, "devnull", rows(t)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dataDir, "journal")); err != nil {
		t.Fatal(err)
	}
	_, err := tx.Precommit(ctx)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "the journal directory was removed: restart the server") {
		t.Fatalf("precommit after the journal was removed: %v, want Unavailable asking for a restart", err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Status != "degraded" || !strings.Contains(h.Journal, "removed") {
		t.Fatalf("health: %+v, %v", h, err)
	}
	if code, _ := p.readyz(t); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d, want 503", code)
	}
	wantMetric(t, p, "quiver_journal_healthy", 0)

	// A second server may now lock the recreated directory; the first
	// must not journal next to it.
	p2 := startQuiver(t, cfg)
	if _, err := dial(t, p2).Begin(ctx, "w", 2, 0); err != nil {
		t.Fatalf("begin on the second server: %v", err)
	}
	if _, err := c.Begin(ctx, "v", 1, 0); status.Code(err) != codes.Unavailable {
		t.Fatalf("begin on the first server after the second started: %v, want Unavailable", err)
	}
}

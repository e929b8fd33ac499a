package journal

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// flakyFile injects the failures of a full or failing disk into the active
// segment while its switches are on.
type flakyFile struct {
	segmentFile
	mu       sync.Mutex
	full     bool // writes store half their bytes, then fail with ENOSPC
	syncErr  bool // Sync fails with EIO
	truncErr bool // Truncate fails with EIO
}

func (f *flakyFile) set(fn func(f *flakyFile)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *flakyFile) Write(b []byte) (int, error) {
	f.mu.Lock()
	full := f.full
	f.mu.Unlock()
	if full {
		n, _ := f.segmentFile.Write(b[:len(b)/2])
		return n, syscall.ENOSPC
	}
	return f.segmentFile.Write(b)
}

func (f *flakyFile) Sync() error {
	f.mu.Lock()
	fail := f.syncErr
	f.mu.Unlock()
	if fail {
		return syscall.EIO
	}
	return f.segmentFile.Sync()
}

func (f *flakyFile) Truncate(size int64) error {
	f.mu.Lock()
	fail := f.truncErr
	f.mu.Unlock()
	if fail {
		return syscall.EIO
	}
	return f.segmentFile.Truncate(size)
}

// openFlaky opens a journal in dir whose active segment is a flakyFile,
// with its metrics in reg and its log in logs.
func openFlaky(t *testing.T, dir string, reg prometheus.Registerer, logs *bytes.Buffer) (*Journal, *flakyFile) {
	t.Helper()
	var ff *flakyFile
	j, _, err := Open(dir, Options{
		Logger:     slog.New(slog.NewTextHandler(logs, nil)),
		Registerer: reg,
		wrapFile: func(f segmentFile) segmentFile {
			ff = &flakyFile{segmentFile: f}
			return ff
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j, ff
}

// TestAppendRecoversWhenDiskHasSpaceAgain: a full disk fails the appends
// and marks the journal unhealthy (metric, ERROR log once); once space is
// back Check and appends work again, and the segment holds exactly the
// acknowledged records.
func TestAppendRecoversWhenDiskHasSpaceAgain(t *testing.T) {
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	j, ff := openFlaky(t, dir, reg, &logs)
	if err := j.Append(rec(0)); err != nil {
		t.Fatal(err)
	}
	ff.set(func(f *flakyFile) { f.full = true })
	for range 3 {
		if err := j.Append(rec(1)); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append on a full disk: %v, want ENOSPC", err)
		}
	}
	if err := j.Health(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Health on a full disk: %v", err)
	}
	if got := testutil.ToFloat64(j.metrics.healthy); got != 0 {
		t.Fatalf("quiver_journal_healthy = %v on a full disk, want 0", got)
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
		t.Fatalf("%d ERROR lines for one cause, want 1:\n%s", n, logs.String())
	}
	// Check probes the directory (a real one, with space): the fault
	// clears without any transaction.
	ff.set(func(f *flakyFile) { f.full = false })
	if err := j.Check(); err != nil {
		t.Fatalf("Check once the disk has space: %v", err)
	}
	if err := j.Health(); err != nil || testutil.ToFloat64(j.metrics.healthy) != 1 {
		t.Fatalf("Health after recovery: %v, gauge %v", err, testutil.ToFloat64(j.metrics.healthy))
	}
	if !strings.Contains(logs.String(), "writable again") {
		t.Fatalf("no recovery line:\n%s", logs.String())
	}
	if err := j.Append(rec(1)); err != nil {
		t.Fatalf("append after recovery: %v", err)
	}
	j.Close()
	checkRecords(t, reopen(t, dir), 2)
}

// TestFailedSyncIsCutOff: after a failed fdatasync the unsynced bytes are
// cut off before the next append, which succeeds.
func TestFailedSyncIsCutOff(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	j, ff := openFlaky(t, dir, nil, &logs)
	if err := j.Append(rec(0)); err != nil {
		t.Fatal(err)
	}
	ff.set(func(f *flakyFile) { f.syncErr = true })
	if err := j.Append(rec(5)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("append with a failing sync: %v, want EIO", err)
	}
	ff.set(func(f *flakyFile) { f.syncErr = false })
	if err := j.Append(rec(1)); err != nil {
		t.Fatalf("append after the sync failure: %v", err)
	}
	if err := j.Health(); err != nil {
		t.Fatalf("Health after a successful append: %v", err)
	}
	j.Close()
	checkRecords(t, reopen(t, dir), 2)
}

// TestFailedCutIsRepairedLater: when the partial write cannot be cut off
// at once, the next append cuts it first.
func TestFailedCutIsRepairedLater(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	j, ff := openFlaky(t, dir, nil, &logs)
	if err := j.Append(rec(0)); err != nil {
		t.Fatal(err)
	}
	ff.set(func(f *flakyFile) { f.full, f.truncErr = true, true })
	if err := j.Append(rec(5)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v", err)
	}
	// The cut fails too: the append is refused without writing.
	if err := j.Append(rec(5)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("append while the cut fails: %v, want EIO", err)
	}
	ff.set(func(f *flakyFile) { f.full, f.truncErr = false, false })
	if err := j.Append(rec(1)); err != nil {
		t.Fatalf("append once the disk works: %v", err)
	}
	j.Close()
	checkRecords(t, reopen(t, dir), 2)
}

// TestRemovedDirectoryStopsAppends: with the directory removed under a
// running journal, appends are refused (not acknowledged into a file no
// one will read) and Health and Check say so, for good.
func TestRemovedDirectoryStopsAppends(t *testing.T) {
	for _, what := range []string{"directory", "LOCK", "segment"} {
		t.Run(what, func(t *testing.T) {
			dir := t.TempDir() + "/journal"
			var logs bytes.Buffer
			j, _ := openFlaky(t, dir, nil, &logs)
			if err := j.Append(rec(0)); err != nil {
				t.Fatal(err)
			}
			var err error
			switch what {
			case "directory":
				err = os.RemoveAll(dir)
			case "LOCK":
				err = os.Remove(dir + "/LOCK")
			case "segment":
				err = os.Remove(segPath(dir))
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Check(); !errors.Is(err, ErrRemoved) {
				t.Fatalf("Check: %v, want ErrRemoved", err)
			}
			if err := j.Append(rec(1)); !errors.Is(err, ErrRemoved) || !strings.Contains(err.Error(), "restart the server") {
				t.Fatalf("append: %v, want ErrRemoved", err)
			}
			if err := j.Health(); !errors.Is(err, ErrRemoved) {
				t.Fatalf("Health: %v", err)
			}
		})
	}
}

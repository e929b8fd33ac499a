package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/singleflight"

	"github.com/quiver-ingest/quiver/internal/fsync"
	"github.com/quiver-ingest/quiver/writers"
)

// tempMarker marks the temporary files of file:// writes; see tempPath.
const tempMarker = ".quiver-tmp-"

// tempPath names a temporary file next to path: ".<base>.quiver-tmp-<hex>".
// The leading dot hides it from Hive-style readers, the random part keeps
// concurrent writers (threads or processes) apart, and being in the same
// directory makes the final rename or link a same-filesystem operation.
func tempPath(path string) string {
	var r [8]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails
	dir, base := filepath.Split(path)
	return filepath.Join(dir, "."+base+tempMarker+hex.EncodeToString(r[:]))
}

// isTempName reports whether a file name is a tempPath name.
func isTempName(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempMarker)
}

// path maps a checked key to its file under the root.
func (b *Bucket) path(key string) string {
	return filepath.Join(b.dir, filepath.FromSlash(key))
}

// createTemp creates the temporary file for path (under b's root),
// creating (and syncing) missing parent directories first.
func (b *Bucket) createTemp(path string) (*os.File, error) {
	dir := filepath.Dir(path)
	for retried := false; ; retried = true {
		if err := mkdirAllSync(b.dir, dir); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(tempPath(path), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil || retried || !errors.Is(err, fs.ErrNotExist) {
			return f, err
		}
		// Removed since it was made durable (an operator's cleanup):
		// made again, with its parents.
		for d := dir; d == b.dir || under(b.dir, d); d = filepath.Dir(d) {
			durableDirs.Delete(d)
		}
	}
}

// finishTemp makes f's content durable and closes it; on failure it removes
// the file.
func finishTemp(f *os.File) error {
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// writeTemp writes data to a new durable temporary file for path and
// returns its name.
func (b *Bucket) writeTemp(path string, data []byte) (string, error) {
	f, err := b.createTemp(path)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), finishTemp(f)
}

// publishReplace renames tmp over path and syncs the directory so that the
// new name survives a crash. Readers see the old or the new file, never a
// partial one.
func publishReplace(tmp, path string) error {
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return fsync.Dir(filepath.Dir(path))
}

// publishNew links tmp to path, failing with an error wrapping
// ErrAlreadyExists when path exists. link(2) fails with EEXIST atomically in
// the kernel, so of several processes racing for one name exactly one wins
// and nobody's file is ever replaced (a rename would replace the winner).
func publishNew(tmp, path string) error {
	err := os.Link(tmp, path)
	_ = os.Remove(tmp) // the target name, if linked, keeps the data
	if errors.Is(err, fs.ErrExist) {
		return ErrAlreadyExists
	}
	if err != nil {
		return err
	}
	if err := fsync.Dir(filepath.Dir(path)); err != nil {
		// Visible now, but a crash may still lose it: not a success, and
		// not a failure either (the name is taken).
		return writers.Errorf(writers.ErrOutcomeUnknown, "storage: %s is published but its folder could not be synced: %w", path, err)
	}
	return nil
}

// mkdirAllSync is os.MkdirAll that also makes the name of every directory
// under root durable before a file is published in it: a directory it
// creates is synced into its parent, and so is one under root it finds
// but has not seen synced (another process may not have synced it yet).
// root and the directories above it are taken as they are when they
// exist, unless this process created one and its sync failed or has not
// ended. A directory is synced once per process; concurrent callers share
// the sync and wait for it.
func mkdirAllSync(root, dir string) error {
	if _, ok := durableDirs.Load(dir); ok {
		return nil
	}
	fi, err := os.Stat(dir)
	if err == nil && !fi.IsDir() {
		return &fs.PathError{Op: "mkdir", Path: dir, Err: fs.ErrExist}
	}
	if err == nil && !under(root, dir) {
		if _, unsynced := unsyncedDirs.Load(dir); !unsynced {
			return nil
		}
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAllSync(root, parent); err != nil {
			return err
		}
	}
	_, err, _ = dirSyncs.Do(dir, func() (any, error) {
		unsyncedDirs.Store(dir, struct{}{}) // before it can exist
		if err := os.Mkdir(dir, 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if err := syncParent(parent); err != nil {
			return nil, err
		}
		unsyncedDirs.Delete(dir)
		rememberDurable(dir)
		return nil, nil
	})
	return err
}

// under reports whether dir is strictly below root.
func under(root, dir string) bool {
	rel, err := filepath.Rel(root, dir)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// syncParent syncs the parent of a directory mkdirAllSync made durable (a
// variable, for tests to hold or fail it).
var syncParent = fsync.Dir

// dirSyncs shares a directory's creation and sync among the callers that
// need it at once; durableDirs holds the directories known synced into
// their parents (at most maxDurableDirs: beyond, all are forgotten and
// synced again when next used), unsyncedDirs those mkdirAllSync began to
// make durable and has not. Process-wide, as the directories are.
var (
	dirSyncs     singleflight.Group
	durableDirs  sync.Map
	durableCount atomic.Int64
	unsyncedDirs sync.Map
)

const maxDurableDirs = 1 << 16

func rememberDurable(dir string) {
	if durableCount.Add(1) > maxDurableDirs {
		durableDirs.Clear()
		durableCount.Store(0)
	}
	durableDirs.Store(dir, struct{}{})
}

// fileWriter is NewWriter for file://: a temporary file renamed over the
// target by Close.
type fileWriter struct {
	ctx  context.Context
	f    *os.File
	path string
	err  error // first Write or background sync error; Close then abandons
	// written counts the bytes written (read by the background sync too),
	// synced where the background syncs had got to when the last one
	// started.
	written, synced atomic.Int64
	syncing         chan error  // the background syncs' result; nil when none runs
	closing         atomic.Bool // Close's fsync takes over: no more background syncs
}

// syncAheadBytes is how much of a file being written may wait unsynced
// before the writer syncs it in the background, so that the fsync that
// publishing the file needs finds little left to do. A sync's cost here
// is the data it writes since the one before (the disk's cache flush, not
// only the page cache's writeback: sync_file_range alone left it to the
// final fsync): four Lance append streams waited 30-50 ms of a 250 ms run
// in their final fsyncs without background syncs.
const syncAheadBytes = 2 << 20

// syncAgainBytes is how much written during a background sync makes it
// sync again at once rather than wait for the next write: a writer
// writes in bursts (a Lance flush, a Parquet row group), and what the
// end of a burst left unsynced would otherwise wait for the next one, or
// for the final fsync.
const syncAgainBytes = 256 << 10

func (w *fileWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.f.Write(p)
	w.err = err
	w.written.Add(int64(n))
	w.syncAhead()
	return n, err
}

// syncAhead collects the background syncs if they have ended, and starts
// them when syncAheadBytes more have been written since the last started,
// unless the write is abandoned (ctx done: Close will remove the file).
// One runs at a time: a sync covers everything written before it started.
func (w *fileWriter) syncAhead() {
	if w.syncing != nil {
		select {
		case err := <-w.syncing:
			w.syncing = nil
			w.failSync(err)
		default:
			return
		}
	}
	if w.err != nil || w.written.Load()-w.synced.Load() < syncAheadBytes || w.ctx.Err() != nil {
		return
	}
	done := make(chan error, 1)
	w.syncing = done
	go func(f *os.File) { done <- w.syncBehind(f) }(w.f)
}

// syncBehind syncs f, again while syncAgainBytes or more were written
// during the last sync, until the write is abandoned or closed (Close's
// own fsync covers the rest) or a sync fails.
func (w *fileWriter) syncBehind(f *os.File) error {
	for {
		from := w.written.Load()
		w.synced.Store(from)
		if err := syncData(f); err != nil {
			return err
		}
		if w.written.Load()-from < syncAgainBytes || w.closing.Load() || w.ctx.Err() != nil {
			return nil
		}
	}
}

// failSync records a background sync's error. It must fail the file: the
// kernel reports a lost write to one sync only, so the final fsync may
// succeed after it.
func (w *fileWriter) failSync(err error) {
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("storage: syncing %s: %w", w.path, err)
	}
}

// Close publishes the object unless ctx was cancelled, a Write failed or
// a background sync did, in which case it removes the temporary file and
// returns the cause.
func (w *fileWriter) Close() error {
	if w.f == nil {
		return os.ErrClosed
	}
	f := w.f
	w.f = nil
	w.closing.Store(true)
	if w.syncing != nil {
		w.failSync(<-w.syncing)
		w.syncing = nil
	}
	if w.err == nil {
		w.err = w.ctx.Err()
	}
	if w.err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return w.err
	}
	if err := finishTemp(f); err != nil {
		return err
	}
	return publishReplace(f.Name(), w.path)
}

// openFile is OpenReader for file://: the open file itself is the fastest
// ReaderAt there is (Parquet reads are the hot path). A directory does not
// exist as an object.
func openFile(path string) (*os.File, int64, error) {
	// Stat first: opening a FIFO blocks until a writer comes.
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() && !fi.Mode().IsRegular() {
		return nil, 0, writers.Errorf(writers.ErrInvalid, "%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	switch {
	case err == nil && fi.IsDir():
		err = &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	case err == nil && !fi.Mode().IsRegular():
		err = writers.Errorf(writers.ErrInvalid, "%s is not a regular file", path)
	}
	if err != nil {
		_ = f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

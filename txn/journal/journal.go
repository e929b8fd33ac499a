package journal

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quiver-ingest/quiver/internal/fsync"
)

// slowSync is the fdatasync duration above which a warning is logged.
const slowSync = time.Second

// Options configure a Journal.
type Options struct {
	// Logger; nil discards.
	Logger *slog.Logger
	// Registerer for quiver_journal_fsync_seconds and quiver_journal_bytes;
	// nil registers nothing.
	Registerer prometheus.Registerer

	// wrapFile, when set, wraps the active segment (tests inject failures).
	wrapFile func(segmentFile) segmentFile
}

// Journal is an open journal directory. Append may be called concurrently;
// Compact and Close must not run concurrently with Append.
type Journal struct {
	dir     string
	logger  *slog.Logger
	metrics *metrics
	wrap    func(segmentFile) segmentFile
	lock    *os.File

	// syncMu serializes syncs and repairs and guards synced. It is taken
	// before mu.
	syncMu sync.Mutex
	synced int64 // bytes appended (all segments) known durable

	mu sync.Mutex // guards the following fields
	// dead, once set, fails every later append: the journal was closed,
	// its directory removed, or the switch to a compacted segment failed.
	// Only a restart continues.
	dead error
	// fault is the last failed write or sync; nil once an append, a
	// compaction or a Probe succeeds again. Appends keep trying meanwhile.
	fault error
	// repair: the active segment may hold bytes past durable (a failed
	// sync, or a failed write that could not be cut off); they are cut
	// off before the next append, once no append is in flight.
	repair      bool
	inflight    int   // appends between their write and the end of their sync
	durable     int64 // size of the active segment known durable
	active      segmentFile
	activeSeq   uint64
	activeBytes int64
	oldBytes    int64    // size of the segments before the active one
	oldSeqs     []uint64 // segments before the active one
	written     int64    // bytes appended (all segments) so far
}

// Open locks dir (creating it if needed), reads every record from the
// newest snapshot segment on, truncates a torn tail and returns the journal
// ready for appends with the records in order. Corruption is a
// *CorruptionError. The records' payloads stay valid after Open returns.
func Open(dir string, opts Options) (*Journal, []Record, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, nil, fmt.Errorf("journal: create %s: %w", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, nil, err
	}
	j, recs, err := open(dir, opts, logger, lock)
	if err != nil {
		return nil, nil, errors.Join(err, lock.Close())
	}
	return j, recs, nil
}

func open(dir string, opts Options, logger *slog.Logger, lock *os.File) (*Journal, []Record, error) {
	seqs, err := listSegments(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: list %s: %w", dir, err)
	}
	if len(seqs) == 0 {
		if _, err := createSegment(dir, 1, nil); err != nil {
			return nil, nil, fmt.Errorf("journal: create first segment in %s: %w", dir, err)
		}
		seqs = []uint64{1}
	}
	recs, seqs, sizes, err := readSegments(dir, seqs, logger)
	if err != nil {
		return nil, nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: register metrics: %w", err)
	}
	j := &Journal{dir: dir, logger: logger, metrics: m, wrap: opts.wrapFile, lock: lock}
	last := len(seqs) - 1
	if err := j.activate(seqs[last], sizes[last]); err != nil {
		m.unregister()
		return nil, nil, err
	}
	j.oldSeqs = seqs[:last]
	for _, s := range sizes[:last] {
		j.oldBytes += s
	}
	j.metrics.bytes.Set(float64(j.oldBytes + j.activeBytes))
	return j, recs, nil
}

// activate opens segment seq of size bytes for appending.
func (j *Journal) activate(seq uint64, size int64) error {
	path := filepath.Join(j.dir, segmentName(seq))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("journal: open segment for appending: %w", err)
	}
	var sf segmentFile = osSegment{f}
	if j.wrap != nil {
		sf = j.wrap(sf)
	}
	j.active, j.activeSeq, j.activeBytes, j.durable = sf, seq, size, size
	return nil
}

// Append writes recs to the active segment and returns once they are
// durable (written and fdatasync'd). Appends running at the same time share
// one sync. A record over MaxRecordBytes is refused without writing
// anything. A failed write or sync fails the appends it touches and leaves
// the segment in a known state: the failed bytes are cut off (at once, or
// before the next append), so later appends succeed once the cause (a full
// disk) is gone. Once the directory was removed every Append fails.
func (j *Journal) Append(recs ...Record) error {
	var buf []byte
	for _, r := range recs {
		if 1+len(r.Payload) > MaxRecordBytes {
			return fmt.Errorf("journal: record of %d bytes over the limit of %d", 1+len(r.Payload), MaxRecordBytes)
		}
		buf = appendFrame(buf, r)
	}
	if err := j.repairIfNeeded(); err != nil {
		return err
	}
	j.mu.Lock()
	if err := j.writableLocked(); err != nil {
		j.mu.Unlock()
		return err
	}
	start := j.activeBytes
	n, err := j.active.Write(buf)
	if err == nil && n < len(buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		err = j.writeFailedLocked(start, n, err)
		j.mu.Unlock()
		return err
	}
	j.written += int64(n)
	j.activeBytes += int64(n)
	j.metrics.bytes.Add(float64(n))
	j.inflight++
	target := j.written
	j.mu.Unlock()
	return j.syncTo(target)
}

// syncTo returns once the first target bytes ever appended are durable.
// Whoever holds syncMu syncs everything written so far, so the appends
// queued behind it usually find their bytes already synced. It ends the
// caller's in-flight append.
func (j *Journal) syncTo(target int64) error {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	j.mu.Lock()
	defer func() {
		j.inflight--
		j.mu.Unlock()
	}()
	if j.synced >= target {
		return nil
	}
	if err := j.writableLocked(); err != nil {
		return err
	}
	if j.repair {
		// A failure after this append's write: its bytes will be cut off.
		return j.fault
	}
	upTo, upToActive, f := j.written, j.activeBytes, j.active
	j.mu.Unlock()

	start := time.Now()
	err := f.Sync()
	d := time.Since(start)
	j.metrics.fsync.Observe(d.Seconds())
	if d > slowSync {
		j.logger.Warn("journal: slow fdatasync: the disk under data_dir is slow or saturated", "duration", d)
	}
	j.mu.Lock()
	if err != nil {
		// After a failed fdatasync the unsynced pages' fate is unknown:
		// cut them off before appending again.
		j.repair = true
		return j.failLocked(fmt.Errorf("journal: sync %s: %w", segmentName(j.activeSeq), err))
	}
	// A record synced into a removed file would be lost on restart: it
	// must not be acknowledged.
	if err := j.linkedLocked(); err != nil {
		return err
	}
	j.synced, j.durable = upTo, upToActive
	j.healedLocked()
	return nil
}

// ActiveBytes is the size of the active segment.
func (j *Journal) ActiveBytes() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.activeBytes
}

// Compact starts a new active segment holding snapshot, which must restate
// the whole live state, and deletes the older ones. The caller must
// guarantee that no Append runs meanwhile and that snapshot reflects every
// record appended successfully so far; so a compaction also clears a
// pending repair (the old segment's tail no longer matters). If the new
// segment cannot be made active the journal fails until a restart.
func (j *Journal) Compact(snapshot []Record) error {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.writableLocked(); err != nil {
		return err
	}
	seq := j.activeSeq + 1
	size, err := createSegment(j.dir, seq, snapshot)
	if err != nil {
		return fmt.Errorf("journal: compact into %s: %w", segmentName(seq), err)
	}
	prev, prevSeq := j.active, j.activeSeq
	// From here on recovery starts at the new segment: appends to the old
	// one would be lost, so failing to switch must fail the journal.
	if err := j.activate(seq, size); err != nil {
		return j.dieLocked(fmt.Errorf("journal: switch to compacted segment, no more appends until a restart: %w", err))
	}
	// No append is in flight: whatever was written and not synced belonged
	// to failed appends and stays behind in the old segment.
	j.written, j.repair = j.synced, false
	j.healedLocked()
	var errs []error
	if err := prev.Close(); err != nil {
		errs = append(errs, err)
	}
	for _, s := range append(j.oldSeqs, prevSeq) {
		if err := os.Remove(filepath.Join(j.dir, segmentName(s))); err != nil {
			errs = append(errs, err)
		}
	}
	j.oldSeqs, j.oldBytes = nil, 0
	j.metrics.bytes.Set(float64(size))
	if err := errors.Join(errs...); err != nil {
		// Recovery deletes segments older than the newest snapshot, so a
		// leftover costs disk space only.
		j.logger.Warn("journal: could not remove compacted segments; they are removed on the next start", "err", err)
		return nil
	}
	if err := fsync.Dir(j.dir); err != nil {
		j.logger.Warn("journal: sync directory after compaction", "err", err)
	}
	return nil
}

// Close closes the active segment and releases the directory lock.
// Appends after Close fail. Close is idempotent.
func (j *Journal) Close() error {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.lock == nil {
		return nil
	}
	err := errors.Join(j.active.Close(), j.lock.Close())
	j.lock = nil
	j.dead = errClosed
	j.metrics.unregister()
	return err
}

package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// probeName is the file Check writes to find out whether the disk takes
// writes again. Its suffix makes recovery remove a leftover (listSegments).
const probeName = "probe" + tmpSuffix

// probeBytes is what the probe writes: a page, the least a disk that is
// full refuses.
const probeBytes = 4096

// ErrRemoved is the cause of every append once the journal's directory,
// its LOCK or its active segment was removed while the server ran.
var ErrRemoved = errors.New("the journal directory was removed: restart the server")

// writableLocked returns the error an append must fail with before writing:
// the journal is dead, or its files were removed (which kills it).
func (j *Journal) writableLocked() error {
	if j.dead != nil {
		return j.dead
	}
	return j.linkedLocked()
}

// linkedLocked kills the journal when its LOCK or active segment no longer
// has a name (the directory was removed or replaced): appends would go to
// a file recovery never reads, and a second server could lock the
// directory's successor. Two fstat calls: cheap next to an fdatasync.
func (j *Journal) linkedLocked() error {
	for _, f := range []interface{ Stat() (os.FileInfo, error) }{j.lock, j.active} {
		fi, err := f.Stat()
		if err != nil {
			return j.failLocked(fmt.Errorf("journal: stat %s: %w", j.dir, err))
		}
		if unlinked(fi) {
			return j.dieLocked(fmt.Errorf("journal: %s: %s or the active segment %s is gone: %w", j.dir, "LOCK", segmentName(j.activeSeq), ErrRemoved))
		}
	}
	return nil
}

// writeFailedLocked handles an append whose write failed after n of its
// bytes, starting at offset start of the active segment: it cuts them off
// so the segment ends with whole frames again, or, if that fails too,
// leaves the cut to the next append. It returns the error for the append.
func (j *Journal) writeFailedLocked(start int64, n int, cause error) error {
	err := fmt.Errorf("journal: append to %s: %w", segmentName(j.activeSeq), cause)
	if n > 0 {
		if terr := j.active.Truncate(start); terr != nil {
			j.activeBytes += int64(n)
			j.written += int64(n)
			j.repair = true
			err = fmt.Errorf("%w (cutting off the partial write failed too: %v)", err, terr)
		}
	}
	return j.failLocked(err)
}

// failLocked records err as the journal's fault, logging the first one and
// every change of cause at ERROR, and returns it.
func (j *Journal) failLocked(err error) error {
	j.metrics.failures.Inc()
	if j.fault == nil || j.fault.Error() != err.Error() {
		j.logger.Error("journal: cannot write: transactions fail until the cause is fixed (the journal retries every second and on every transaction)", "dir", j.dir, "err", err)
	}
	j.fault = err
	j.metrics.healthy.Set(0)
	return err
}

// dieLocked makes err the error of every later append.
func (j *Journal) dieLocked(err error) error {
	if j.dead == nil {
		j.logger.Error("journal: stopped: no transaction can be journaled until a restart", "dir", j.dir, "err", err)
	}
	j.dead = err
	j.metrics.healthy.Set(0)
	return err
}

// healedLocked clears the fault after a successful write.
func (j *Journal) healedLocked() {
	if j.fault != nil && !j.repair {
		j.logger.Info("journal: writable again", "dir", j.dir, "after", j.fault)
		j.fault = nil
	}
	if j.dead == nil && j.fault == nil {
		j.metrics.healthy.Set(1)
	}
}

// repairIfNeeded cuts the active segment back to its durable size when a
// failure left unknown bytes after it. It waits for no one: while appends
// are still in flight (they fail in syncTo) it returns the fault, and the
// next append or Check repairs.
func (j *Journal) repairIfNeeded() error {
	j.mu.Lock()
	need := j.repair
	j.mu.Unlock()
	if !need {
		return nil
	}
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.repairLocked()
}

// repairLocked is repairIfNeeded with syncMu and mu held.
func (j *Journal) repairLocked() error {
	if !j.repair {
		return nil
	}
	if err := j.writableLocked(); err != nil {
		return err
	}
	if j.inflight > 0 {
		return j.fault
	}
	cut := j.activeBytes - j.durable
	err := j.active.Truncate(j.durable)
	if err == nil {
		err = j.active.Sync()
	}
	if err != nil {
		return j.failLocked(fmt.Errorf("journal: cut %s back to its last durable record at offset %d: %w", segmentName(j.activeSeq), j.durable, err))
	}
	j.activeBytes, j.written, j.repair = j.durable, j.synced, false
	j.metrics.bytes.Sub(float64(cut))
	j.logger.Warn("journal: cut off the bytes of failed appends", "segment", segmentName(j.activeSeq), "offset", j.durable, "bytes", cut)
	return nil
}

// Check is the journal's periodic self-test, cheap while healthy: it
// notices a removed directory, and while a fault is recorded it repairs
// the segment and writes a probe file, clearing the fault once the disk
// takes writes again (so a server that gets no transactions while it is
// unhealthy still recovers). It returns Health.
func (j *Journal) Check() error {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.writableLocked(); err != nil || j.fault == nil {
		return err
	}
	if err := j.repairLocked(); err != nil {
		return err
	}
	if err := probe(j.dir); err != nil {
		return j.failLocked(fmt.Errorf("journal: probe write in %s: %w", j.dir, err))
	}
	j.healedLocked()
	return nil
}

// probe writes, syncs and removes a page-sized file in dir.
func probe(dir string) error {
	path := filepath.Join(dir, probeName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(make([]byte, probeBytes))
	if werr == nil {
		werr = f.Sync()
	}
	return errors.Join(werr, f.Close(), os.Remove(path))
}

// Health is nil while appends work, else why they fail: the last failed
// write or sync (cleared by the next success), or the error that stopped
// the journal for good (closed, directory removed).
func (j *Journal) Health() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.dead != nil {
		return j.dead
	}
	return j.fault
}

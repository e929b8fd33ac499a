package lance

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"golang.org/x/sync/errgroup"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
)

var _ writers.Maintainer = (*Writer)(nil)

// Compaction planned as Lance's plan_compaction does, with Quiver's
// targets: fragments below maxFileRows rows and below the target bytes
// are compacted with their neighbours; a fragment with more than
// deletionsThreshold of its rows deleted is rewritten even alone
// (materialize_deletions).
const (
	deletionsThreshold = 0.1
	// maxOptimizeAttempts bounds how often Optimize plans again after
	// losing to a concurrent commit that changed one of its fragments.
	maxOptimizeAttempts = 3
)

// Optimize compacts the dataset much as Lance's compact_files does: runs of
// adjacent small fragments (fewer than 1Mi rows and fewer than
// req.TargetFileBytes bytes of data files) are rewritten into fragments
// of up to that size, and fragments with more than 10% of their rows
// deleted are rewritten without them, in one Rewrite version (groups of
// old and new fragments) in the dataset's file format. Fragments an index
// covers are left alone (Quiver does not remap indices), and so are those
// a merge_insert precommitted in this process touched (pins.go), and so
// are groups this writer found not to shrink before (barrenGroups).
//
// Concurrent appends rebase over the Rewrite, and it over them; a
// concurrent delete, update or compaction of one of its fragments makes
// it delete what it wrote and plan again on the new version, at most
// maxOptimizeAttempts times, then answer ErrConflict. Memory: three
// fragments' rows per group being written, up to maxCompactors groups at
// a time (see rewrite, writeGroup).
func (w *Writer) Optimize(ctx context.Context, req writers.OptimizeRequest) (writers.OptimizeResult, error) {
	for attempt := 1; ; attempt++ {
		res, err := w.optimizeOnce(ctx, req)
		if !errors.Is(err, writers.ErrConflict) || errors.Is(err, writers.ErrOutcomeUnknown) || attempt == maxOptimizeAttempts {
			return res, err
		}
		w.log.Info("lance: optimize lost to a concurrent commit; planning again", "err", err, "attempt", attempt)
	}
}

// compactTarget is where compaction ends a fragment (and what it deems
// small).
type compactTarget struct{ rows, bytes uint64 }

func (w *Writer) optimizeOnce(ctx context.Context, req writers.OptimizeRequest) (writers.OptimizeResult, error) {
	d, err := w.latest(ctx)
	if err != nil || d == nil {
		return writers.OptimizeResult{Version: writers.NoVersion}, err
	}
	res := writers.OptimizeResult{Version: int64(d.Version())}
	indexed, err := d.Indexed()
	if err != nil {
		return res, err
	}
	pinned := w.pins.Pinned()
	target := compactTarget{rows: maxFileRows, bytes: uint64(req.TargetFileBytes)}
	plan := planCompaction(d.Manifest.Fragments, target, func(id uint64) bool { return pinned[id] || indexed(id) })
	plan, barren := w.barren.filter(plan)
	if len(plan) == 0 {
		w.barren.set(barren)
		return res, nil
	}
	minor, err := d.FileMinor()
	if err != nil {
		return res, err
	}
	txn, written, err := w.rewrite(ctx, d, plan, minor, target)
	if err != nil {
		return res, fmt.Errorf("lance: optimize %s: %w", w.cfg.DatasetURI, err)
	}
	for i, g := 0, 0; i < len(plan); i++ { // txn.Groups: plan's that shrink, in order
		if g < len(txn.Groups) && txn.Groups[g].Old[0].ID == plan[i][0].ID {
			g++
		} else {
			barren[groupKey(plan[i])] = true
		}
	}
	w.barren.set(barren)
	if len(txn.Groups) == 0 {
		return res, nil // no group shrinks
	}
	var nd *lancetable.Dataset
	err = w.pins.Commit(ctx, func(pinned map[uint64]bool) error {
		for _, g := range txn.Groups {
			for _, f := range g.Old {
				if pinned[f.ID] {
					// A merge precommitted while the fragments were
					// rewritten touched this one: let it publish.
					return writers.Errorf(writers.ErrConflict, "lance: a merge_insert precommitted meanwhile touched fragment %d", f.ID)
				}
			}
		}
		defer w.pins.Publishing()()
		// Versions after d may be gone (a vacuum): publish on the latest.
		base, err := lancetable.Rebase(ctx, w.bucket, d, txn)
		if err != nil {
			return err
		}
		nd, err = lancetable.Commit(ctx, w.bucket, base, txn)
		return err
	})
	if err != nil {
		err = fmt.Errorf("lance: optimize %s: %w", w.cfg.DatasetURI, err)
		if errors.Is(err, writers.ErrOutcomeUnknown) {
			// The version may have landed and reference them: leave the
			// files (a vacuum reclaims them if it did not).
			return res, err
		}
		return res, errors.Join(err, w.deleteWritten(ctx, written))
	}
	for _, g := range txn.Groups {
		for _, f := range g.Old {
			for _, df := range f.Files {
				res.FilesRemoved++
				res.BytesRemoved += int64(w.dataFileSize(ctx, df))
			}
		}
	}
	for _, f := range written {
		res.FilesAdded++
		res.BytesAdded += int64(f.Size)
		res.Rows += int64(f.Rows)
	}
	w.m.version.Set(float64(nd.Version()))
	res.Version = int64(nd.Version())
	w.log.Info("lance: optimize committed", "version", res.Version, "groups", len(txn.Groups),
		"files_removed", res.FilesRemoved, "files_added", res.FilesAdded, "rows", res.Rows)
	return res, nil
}

// planCompaction groups the fragments to rewrite as Lance's
// plan_compaction does: a fragment is a candidate when more than
// deletionsThreshold of its rows are deleted (rewritten even alone) or it
// is below target in rows and bytes (rewritten with candidate
// neighbours); runs of adjacent candidates form bins, a fragment skip
// reports (indexed or pinned) ends a run and is never rewritten, and a
// bin is split into groups of about target. A group of one small
// fragment without enough deletions gains nothing and is dropped.
func planCompaction(frags []lancetable.Fragment, target compactTarget, skip func(id uint64) bool) [][]lancetable.Fragment {
	var (
		out  [][]lancetable.Fragment
		bin  []lancetable.Fragment
		self []bool // bin[i] is rewritten even alone
	)
	flush := func() {
		for len(bin) > 0 {
			n := splitAt(bin, target)
			if n > 1 || self[0] {
				out = append(out, bin[:n:n])
			}
			bin, self = bin[n:], self[n:]
		}
		bin, self = nil, nil
	}
	for _, f := range frags {
		deleted := f.Deletion != nil && float64(f.PhysicalRows-f.LiveRows()) > deletionsThreshold*float64(f.PhysicalRows)
		small := f.PhysicalRows < target.rows && dataBytes(&f) < target.bytes
		if skip(f.ID) || (!deleted && !small) {
			flush()
			continue
		}
		bin, self = append(bin, f), append(self, deleted)
	}
	flush()
	return out
}

// barrenGroups remembers the compaction groups optimize found not to
// shrink, so that the next (scheduled) run does not rewrite them again
// while they stay as they are: a group of other fragments, or of the same
// ones with rows deleted since, has another key.
type barrenGroups struct {
	mu   sync.Mutex
	keys map[string]bool
}

// groupKey identifies a group: its fragments' ids, rows and data files.
func groupKey(g []lancetable.Fragment) string {
	var b strings.Builder
	for _, f := range g {
		fmt.Fprintf(&b, "%d/%d/%d", f.ID, f.PhysicalRows, f.LiveRows())
		for _, df := range f.Files {
			b.WriteString("/" + df.Path)
		}
		b.WriteByte(' ')
	}
	return b.String()
}

// filter returns the groups of plan not known to be barren, and the keys
// of those that are.
func (b *barrenGroups) filter(plan [][]lancetable.Fragment) ([][]lancetable.Fragment, map[string]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var todo [][]lancetable.Fragment
	known := map[string]bool{}
	for _, g := range plan {
		if k := groupKey(g); b.keys[k] {
			known[k] = true
		} else {
			todo = append(todo, g)
		}
	}
	return todo, known
}

// set replaces the barren groups (the last plan's: the set does not grow
// beyond one plan).
func (b *barrenGroups) set(keys map[string]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.keys = keys
}

// splitAt returns how many fragments of bin form its first group: at
// least target in live rows or bytes, unless what would remain after it
// is less than that, which then joins it (as Lance's split_for_size).
func splitAt(bin []lancetable.Fragment, target compactTarget) int {
	reached := func(fs []lancetable.Fragment) bool {
		var rows, size uint64
		for i := range fs {
			rows += fs[i].LiveRows()
			size += liveBytes(&fs[i])
		}
		return rows >= target.rows || size >= target.bytes
	}
	for n := 1; n <= len(bin); n++ {
		if reached(bin[:n]) {
			if reached(bin[n:]) {
				return n
			}
			return len(bin)
		}
	}
	return len(bin)
}

// dataBytes is the size of f's data files as the manifest records them
// (0 for files of writers that record none).
func dataBytes(f *lancetable.Fragment) uint64 {
	var n uint64
	for _, df := range f.Files {
		n += df.SizeBytes
	}
	return n
}

// liveBytes estimates the bytes f's live rows take.
func liveBytes(f *lancetable.Fragment) uint64 {
	if f.PhysicalRows == 0 {
		return 0
	}
	return uint64(float64(dataBytes(f)) * float64(f.LiveRows()) / float64(f.PhysicalRows))
}

// minFileRows is the fewest rows rowsPerFile plans in a data file (one
// Lance row group): a tiny target_file_bytes must not turn a fragment into
// a file per row.
const minFileRows = 1024

// rowsPerFile is how many rows of frags make a data file of target: its
// rows, or fewer (down to minFileRows) when the fragments' data files say
// their rows are wide.
func rowsPerFile(frags []lancetable.Fragment, target compactTarget) uint64 {
	var size, rows uint64
	for i := range frags {
		size += dataBytes(&frags[i])
		rows += frags[i].PhysicalRows
	}
	if size == 0 || rows == 0 {
		return target.rows
	}
	return min(target.rows, max(minFileRows, uint64(float64(target.bytes)/(float64(size)/float64(rows)))))
}

// maxCompactors bounds the groups optimize rewrites at once.
const maxCompactors = 4

// rewrite writes the new data files of plan's groups, up to
// min(GOMAXPROCS, maxCompactors) groups at a time, and returns the
// Rewrite transaction replacing each group that shrinks by its files, and
// those files (a group that does not shrink is left as it is, and the new
// files written for it are deleted). A group of several output files is
// written as several runs at once (fileRuns), so that one large group
// uses every core too. On error it deletes what it wrote.
func (w *Writer) rewrite(ctx context.Context, d *lancetable.Dataset, plan [][]lancetable.Fragment, minor uint16, target compactTarget) (*lancetable.Transaction, []fragment, error) {
	runs := make([][][]fragment, len(plan)) // per group, per run: its files
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(min(runtime.GOMAXPROCS(0), maxCompactors))
	for i, old := range plan {
		perFile := rowsPerFile(old, target)
		parts := fileRuns(old, perFile)
		runs[i] = make([][]fragment, len(parts))
		for j, part := range parts {
			g.Go(writers.Guard(func() (err error) {
				runs[i][j], err = w.writeGroup(gctx, d, part, minor, perFile, target)
				return err
			}))
		}
	}
	err := g.Wait()
	files := make([][]fragment, len(plan))
	for i := range runs {
		for _, fs := range runs[i] {
			files[i] = append(files[i], fs...)
		}
	}
	var written []fragment
	for _, fs := range files {
		written = append(written, fs...)
	}
	if err != nil {
		return nil, nil, errors.Join(err, w.deleteWritten(ctx, written))
	}
	txn := &lancetable.Transaction{Op: lancetable.OpRewrite}
	var kept, useless []fragment
	for i, old := range plan {
		if !shrinks(old, files[i]) {
			useless = append(useless, files[i]...)
			continue
		}
		g := lancetable.RewriteGroup{Old: old}
		for _, f := range files[i] {
			g.New = append(g.New, f.lance())
		}
		txn.Groups = append(txn.Groups, g)
		kept = append(kept, files[i]...)
	}
	if err := w.deleteWritten(ctx, useless); err != nil {
		return nil, nil, errors.Join(err, w.deleteWritten(ctx, kept))
	}
	return txn, kept, nil
}

// fileRuns splits a group's fragments into consecutive runs of at most
// perFile live rows, one data file each, when that makes no more files
// than writing the group as one (rolling every perFile rows); else the
// group is one run.
func fileRuns(frags []lancetable.Fragment, perFile uint64) [][]lancetable.Fragment {
	var runs [][]lancetable.Fragment
	var total, rows uint64
	start := 0
	for i := range frags {
		n := frags[i].LiveRows()
		total += n
		if i > start && rows+n > perFile {
			runs = append(runs, frags[start:i])
			start, rows = i, 0
		}
		rows += n
	}
	runs = append(runs, frags[start:])
	if perFile == 0 || uint64(len(runs)) > max(1, (total+perFile-1)/perFile) {
		return [][]lancetable.Fragment{frags}
	}
	return runs
}

// shrinks reports whether rewriting old as files gains anything: fewer
// files, or deleted rows dropped. It does not when the files had to roll
// early, e.g. before dictionaries that together outgrow their index type.
func shrinks(old []lancetable.Fragment, files []fragment) bool {
	if len(files) < len(old) {
		return true
	}
	for i := range old {
		if old[i].LiveRows() < old[i].PhysicalRows {
			return true
		}
	}
	return false
}

// writeGroup writes the live rows of frags, in order, into new data files
// of the dataset's schema in format 2.minor, each of perFile rows (the
// last one holds the rest) or fewer if it reaches target bytes first, and
// returns their fragments; on error it deletes what it wrote. Each
// fragment is read once, whole, and must yield the live rows its
// manifest entry promises (else ErrInvalid: a wrong deletion count must
// not lose rows). Reading and encoding are pipelined: one goroutine reads
// the fragments one after the other, this one encodes, with one fragment
// (or one record of one) in between, so memory stays at three fragments'
// rows (being encoded, in between, being read) plus the open file's
// pages, held on the memory budget.
func (w *Writer) writeGroup(ctx context.Context, d *lancetable.Dataset, frags []lancetable.Fragment, minor uint16, perFile uint64, target compactTarget) (_ []fragment, err error) {
	s := &stage{schema: &d.Manifest.Schema, minor: minor, rollRows: max(perFile, 1), rollBytes: target.bytes}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.discard(context.WithoutCancel(ctx), s))
		}
	}()
	mem := w.env.Allocator
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recs := make(chan arrow.RecordBatch, 1)
	read := make(chan error, 1)
	go func() {
		defer close(recs)
		read <- func() (err error) {
			defer writers.Recover(&err) // the sink's goroutine: gRPC's recovery does not cover it
			for i := range frags {
				f := &frags[i]
				frag, err := d.ReadFragment(ctx, w.bucket, f, mem)
				if err != nil {
					return fmt.Errorf("read fragment %d: %w", f.ID, err)
				}
				if got := uint64(lancefile.Rows(frag)); got != f.LiveRows() {
					lancefile.ReleaseRecords(frag)
					return writers.Errorf(writers.ErrInvalid, "fragment %d: read %d live rows, its manifest entry says %d (%d physical, %d deleted): refusing to rewrite it",
						f.ID, got, f.LiveRows(), f.PhysicalRows, f.PhysicalRows-f.LiveRows())
				}
				for i, rec := range frag {
					w.budget.Hold(writers.MemoryEncoder, int64(util.TotalRecordSize(rec)))
					select {
					case recs <- rec:
					case <-ctx.Done():
						w.release(rec)
						lancefile.ReleaseRecords(frag[i+1:])
						return ctx.Err()
					}
				}
			}
			return nil
		}()
	}()
	var encErr error
	for rec := range recs {
		if encErr == nil {
			if encErr = w.appendRows(ctx, s, rec); encErr != nil {
				cancel() // stop reading: nothing more will be encoded
			}
		}
		w.release(rec)
	}
	readErr := <-read
	if encErr == nil && readErr == nil {
		encErr = w.finishFiles(s)
	}
	if encErr != nil {
		return nil, encErr // the cause; readErr is then the cancellation
	}
	if readErr != nil {
		return nil, readErr
	}
	return s.finished, nil
}

// release releases a fragment's rows read by writeGroup and gives back
// what they held on the memory budget.
func (w *Writer) release(rec arrow.RecordBatch) {
	w.budget.Hold(writers.MemoryEncoder, -int64(util.TotalRecordSize(rec)))
	rec.Release()
}

// appendRows appends rec to s's data files, slicing it so that every file
// ends exactly at s.rollRows rows.
func (w *Writer) appendRows(ctx context.Context, s *stage, rec arrow.RecordBatch) (err error) {
	defer writers.Recover(&err)
	for off := int64(0); off < rec.NumRows(); {
		n := rec.NumRows() - off
		if f, ok := s.openFile(); ok {
			n = min(n, int64(s.rollRows-f.fw.Rows()))
		} else {
			n = min(n, int64(s.rollRows))
		}
		part := rec.NewSlice(off, off+n)
		err := w.writeRec(ctx, s, part)
		part.Release()
		if err != nil {
			return err
		}
		off += n
	}
	return nil
}

// deleteWritten deletes the data files of a failed optimize.
func (w *Writer) deleteWritten(ctx context.Context, frags []fragment) error {
	var errs []error
	for _, f := range frags {
		if err := w.bucket.Delete(context.WithoutCancel(ctx), lancetable.DataKey(f.Path)); err != nil {
			errs = append(errs, fmt.Errorf("lance: delete data file %s of the failed optimize: %w", f.Path, err))
		}
	}
	return errors.Join(errs...)
}

// dataFileSize is df's size: the manifest's, else its object's (0 when
// that cannot be read: the figure is only reported).
func (w *Writer) dataFileSize(ctx context.Context, df lancetable.DataFile) uint64 {
	if df.SizeBytes > 0 {
		return df.SizeBytes
	}
	o, err := w.bucket.Stat(ctx, lancetable.DataKey(df.Path))
	if err != nil {
		return 0
	}
	return uint64(o.Size)
}

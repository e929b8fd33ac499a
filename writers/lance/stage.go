package lance

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lanceformat"
)

// Data files roll at whichever limit comes first (LanceDB's default
// max_rows_per_file is 1Mi rows).
const (
	maxFileRows  = 1 << 20
	maxFileBytes = 1 << 30
)

// stage is what one key wrote on this server. Only the key's own calls
// use it, never concurrently, so it has no lock.
type stage struct {
	schema       *lanceformat.Schema // Lance schema of the files; nil until the first batch
	minor        uint16              // file format 2.minor of the files
	admitted     *arrow.Schema       // last Arrow schema checked
	open         *dataFile
	finished     []fragment // durable, in no descriptor yet: Rollback deletes them
	precommitted []fragment // in a descriptor: never deleted here
	// rollRows and rollBytes end a data file (0: maxFileRows and
	// maxFileBytes; optimize sets its target).
	rollRows, rollBytes uint64
	// source is the merge_insert source (retained), merged at Precommit;
	// build is its key-encoded form, built as it arrives (nil for a
	// changelog, collapsed at Precommit).
	source []arrow.RecordBatch
	build  *sourceBuilder
	// patch is the precommitted merge's change to the key index, for
	// Commit (nil: none, the next sync catches up).
	patch *indexPatch
}

// dataFile is one data file being streamed to storage, in one of the
// process's file writer slots.
type dataFile struct {
	name   string
	cancel context.CancelFunc // abandons the upload
	out    io.WriteCloser
	fw     *lanceformat.FileWriter
	arrow  *arrow.Schema
	slot   func() // gives back the slot (limits.max_open_files)
	held   int64  // fw's pending bytes held on the memory budget
}

// account brings what f holds on the budget up to date with its writer.
func (f *dataFile) account(budget writers.MemoryCharger) {
	now := f.fw.Pending()
	budget.Hold(writers.MemoryEncoder, now-f.held)
	f.held = now
}

// close gives back f's budget and slot once its writer is done.
func (f *dataFile) close(budget writers.MemoryCharger) {
	budget.Hold(writers.MemoryEncoder, -f.held)
	f.held = 0
	f.slot()
}

// Write stages rec (borrowed) for key: in append mode in the key's open
// data file, in merge_insert mode in memory (retained) until Precommit
// merges it. A record whose schema does not match the dataset's (in
// merge_insert mode: besides the changelog columns _op, _ts_ms and
// __weight), or in merge_insert mode has a null key (a changelog's are
// found at Precommit), is ErrInvalid and stages nothing.
func (w *Writer) Write(ctx context.Context, key writers.TxnKey, rec arrow.RecordBatch) error {
	s, err := w.stages.Get(key, true)
	if err != nil {
		return err
	}
	if s.admitted == nil || !s.admitted.Equal(rec.Schema()) {
		ls, minor, err := w.admit(ctx, rec.Schema())
		if err != nil {
			return err
		}
		if s.schema != nil && (!s.schema.Equal(ls) || s.minor != minor) {
			return writers.Errorf(writers.ErrInvalid, "lance: the stream's schema changed: send one schema per stream")
		}
		s.schema, s.admitted, s.minor = ls, rec.Schema(), minor
	}
	if w.cfg.WriteMode == ModeMergeInsert {
		return w.writeMerge(s, rec)
	}
	return w.writeRec(ctx, s, rec)
}

// writeRec writes the admitted rec into s's open data file, rolling it at
// the file limits, and before rec when its dictionaries would outgrow the
// file's index types.
func (w *Writer) writeRec(ctx context.Context, s *stage, rec arrow.RecordBatch) error {
	var err error
	if s.open != nil && (!s.open.arrow.Equal(rec.Schema()) || !s.open.fw.FitsDictionaries(rec)) {
		if err := w.finishOpen(s); err != nil {
			return err
		}
	}
	if s.open == nil {
		if s.open, err = w.newDataFile(ctx, rec.Schema(), s.schema, s.minor); err != nil {
			return err
		}
	}
	f := s.open
	err = f.fw.Write(rec)
	if err == nil && w.budget.Pressure() {
		err = f.fw.Flush() // pages cut early rather than memory held
	}
	f.account(w.budget)
	if err != nil {
		return fmt.Errorf("lance: encode rows into data/%s: %w", f.name, err)
	}
	if rows, size := s.limits(); s.open.fw.Rows() >= rows || s.open.fw.BytesWritten() >= size {
		return w.finishOpen(s)
	}
	return nil
}

// limits returns the rows and bytes at which s's data files end.
func (s *stage) limits() (rows, size uint64) {
	rows, size = maxFileRows, maxFileBytes
	if s.rollRows > 0 {
		rows = s.rollRows
	}
	if s.rollBytes > 0 {
		size = s.rollBytes
	}
	return rows, size
}

// admit checks an Arrow schema against the dataset (or, before it
// exists, that it maps to Lance) and returns the Lance schema and the file
// format (2.minor: the dataset's, or for a new one data_storage_version)
// to write.
// Column names must be ones Lance accepts (checkNames). In merge_insert
// mode the changelog columns are ignored and the key columns must exist.
// It has no side effects: a dataset is created by the commit that
// publishes its first rows.
func (w *Writer) admit(ctx context.Context, got *arrow.Schema) (*lanceformat.Schema, uint16, error) {
	if w.cfg.WriteMode == ModeMergeInsert {
		if _, err := merge.NewKeyEncoder(got, w.cfg.On); err != nil {
			return nil, 0, fmt.Errorf("lance: merge_insert keys (on): %w", err)
		}
		if isChangelog(got) {
			if _, err := merge.NewCollapser(got, merge.Options{Keys: w.cfg.On}); err != nil {
				return nil, 0, fmt.Errorf("lance: merge_insert changelog: %w", err)
			}
		}
		got = merge.StripMetadata(got)
	}
	if err := checkNames(got); err != nil {
		return nil, 0, err
	}
	d, err := w.latest(ctx)
	if err != nil {
		return nil, 0, err
	}
	if d == nil {
		minor := uint16(lanceformat.DefaultFormat)
		if v := w.cfg.DataStorageVersion; v != "" {
			minor, _ = lanceformat.ParseFormatVersion(v)
		}
		ls, err := lanceformat.FromArrow(got)
		if err == nil {
			err = lanceformat.CheckFormatTypes(got, minor)
		}
		if err == nil {
			err = ls.CheckLayouts()
		}
		return ls, minor, err
	}
	minor, err := d.FileMinor()
	if err != nil {
		return nil, 0, err
	}
	want, err := d.Manifest.Schema.ToArrow()
	if err != nil {
		return nil, 0, err
	}
	if msg := writers.SchemaMismatch(want, got); msg != "" {
		return nil, 0, writers.Errorf(writers.ErrInvalid, "lance: %s (dataset columns: %s)", msg, writers.FieldList(want))
	}
	return &d.Manifest.Schema, minor, lanceformat.CheckFormatTypes(got, minor)
}

func (w *Writer) newDataFile(ctx context.Context, as *arrow.Schema, ls *lanceformat.Schema, minor uint16) (*dataFile, error) {
	// A key has one open file, so it waits for a slot holding none.
	slot, err := w.budget.OpenFile(ctx)
	if err != nil {
		return nil, fmt.Errorf("lance: open a data file: %w", err)
	}
	name := lanceformat.NewDataFileName()
	// The upload outlives the Write call that starts it.
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	out, err := w.bucket.NewWriter(fctx, lanceformat.DataKey(name))
	if err != nil {
		cancel()
		slot()
		return nil, fmt.Errorf("lance: start data file %s: %w", name, err)
	}
	fw, err := lanceformat.NewFileWriter(out, as, ls, 0, minor)
	if err != nil {
		cancel()
		out.Close()
		slot()
		return nil, err
	}
	return &dataFile{name: name, cancel: cancel, out: out, fw: fw, arrow: as, slot: slot}, nil
}

// finishOpen completes the open data file and records its fragment.
func (w *Writer) finishOpen(s *stage) error {
	f := s.open
	s.open = nil
	defer f.close(w.budget)
	defer f.cancel()
	size, err := f.fw.Close()
	if err != nil {
		f.cancel()
		f.out.Close()
		return fmt.Errorf("lance: finish data file %s: %w", f.name, err)
	}
	if err := f.out.Close(); err != nil {
		return fmt.Errorf("lance: upload data file %s: %w", f.name, err)
	}
	fr := fragment{Path: f.name, Size: size, Rows: f.fw.Rows(), Minor: s.minor}
	w.m.filesWritten.Inc()
	w.m.bytesWritten.Add(float64(size))
	w.m.rowsWritten.Add(float64(fr.Rows))
	// Fields without a column (structs and lists in format 2.1+) are
	// left out of the data file, as Lance does.
	cols := f.fw.FieldColumns()
	for i, fl := range s.schema.Fields {
		if cols[i] >= 0 {
			fr.Fields = append(fr.Fields, fl.ID)
			fr.Columns = append(fr.Columns, cols[i])
		}
	}
	s.finished = append(s.finished, fr)
	return nil
}

// Precommit finishes key's data files and returns the descriptor of their
// fragments (in merge_insert mode: runs the merge, see precommitMerge).
// They stay invisible until a Commit publishes them.
func (w *Writer) Precommit(ctx context.Context, key writers.TxnKey) (writers.Descriptor, error) {
	s, err := w.stages.Get(key, true)
	if err != nil {
		return nil, err
	}
	if w.cfg.WriteMode == ModeMergeInsert {
		var touched []uint64
		if err := w.pins.BeginPlan(ctx); err != nil {
			return nil, err
		}
		defer func() { w.pins.EndPlan(key, touched) }()
		return w.precommitMerge(ctx, s, &touched)
	}
	if s.open != nil {
		if err := w.finishOpen(s); err != nil {
			return nil, err
		}
	}
	d := descriptor{Schema: s.schema, Fragments: s.finished}
	s.precommitted = append(s.precommitted, s.finished...)
	s.finished = nil
	return d.encode()
}

// Rollback discards what key staged: the open file is abandoned and
// finished files no descriptor names are deleted. Idempotent.
func (w *Writer) Rollback(ctx context.Context, key writers.TxnKey) error {
	if w.pins != nil {
		w.pins.Unpin(key)
	}
	return w.stages.Rollback(ctx, key)
}

func (w *Writer) discard(ctx context.Context, s *stage) error {
	releaseSource(s)
	if s.open != nil {
		s.open.fw.Abort()
		s.open.cancel()
		s.open.out.Close() // cancelled: the object never appears
		s.open.close(w.budget)
		s.open = nil
	}
	var errs []error
	for _, f := range s.finished {
		if err := w.bucket.Delete(ctx, lanceformat.DataKey(f.Path)); err != nil {
			errs = append(errs, fmt.Errorf("lance: delete staged file %s: %w", f.Path, err))
		}
	}
	s.finished = nil
	return errors.Join(errs...)
}

package lance

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/tablesink"
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
	schema       *lancefile.Schema // Lance schema of the files; nil until the first batch
	minor        uint16            // file format 2.minor of the files
	admitted     *arrow.Schema     // last Arrow schema checked
	files        *staged           // the open data file; nil until rows come and after finishFiles
	finished     []fragment        // durable, in no descriptor yet: Rollback deletes them
	precommitted []fragment        // in a descriptor: never deleted here
	// rollRows and rollBytes end a data file (0: maxFileRows and
	// maxFileBytes; optimize sets its target).
	rollRows, rollBytes uint64
	// source is the merge_insert source (retained), merged at Precommit;
	// build is its key-encoded form, built as it arrives (nil for a
	// changelog, collapsed at Precommit).
	source []arrow.RecordBatch
	build  *sourceBuilder
	// streamed reports that s's data files hold (or out is writing)
	// exactly build's rows, in order: the output a merge is guessed to
	// write (eagerOut), written as the source arrives.
	streamed bool
	out      *outStream // writes s's files while the stream arrives; nil: none
	// patch is the precommitted merge's change to the key index, for
	// Commit (nil: none, the next sync catches up).
	patch *indexPatch
	// merged is the descriptor of the key's merge once its Precommit
	// succeeded: a repeated Precommit (the transaction's precommit retried
	// after another participant or the journal failed) returns it again,
	// the source being gone, and the key takes no more rows.
	merged writers.Descriptor
}

// staged encodes a key's rows into data files (tablesink.Staged) on the
// key's goroutine: a key has one open file.
type staged = tablesink.Staged[*dataFile, fragment]

// dataFile is one data file being streamed to storage, in one of the
// process's file writer slots.
type dataFile struct {
	m          *metrics
	name       string
	up         *tablesink.Upload
	fw         *lancefile.FileWriter
	arrow      *arrow.Schema
	schema     *lancefile.Schema // the dataset's
	minor      uint16
	rows, size uint64 // the file is finished at these (stage.limits)
}

// Fits also rolls a file before rec when its dictionaries would outgrow
// the file's index types.
func (f *dataFile) Fits(rec arrow.RecordBatch) bool {
	return f.arrow.Equal(rec.Schema()) && f.fw.FitsDictionaries(rec)
}
func (f *dataFile) Buffered() int64 { return f.fw.Pending() }
func (f *dataFile) Full() bool      { return f.fw.Rows() >= f.rows || f.fw.BytesWritten() >= f.size }

func (f *dataFile) Name() string                      { return "data/" + f.name }
func (f *dataFile) Write(rec arrow.RecordBatch) error { return f.fw.Write(rec) }

// Flush cuts pages early rather than hold memory.
func (f *dataFile) Flush() error { return f.fw.Flush() }

// Finish completes the data file and returns its fragment.
func (f *dataFile) Finish() (fragment, error) {
	var size uint64
	if err := f.up.Close(func() (err error) {
		size, err = f.fw.Close()
		return err
	}); err != nil {
		return fragment{}, err
	}
	fr := fragment{Path: f.name, Size: size, Rows: f.fw.Rows(), Minor: f.minor}
	f.m.filesWritten.Inc()
	f.m.bytesWritten.Add(float64(size))
	f.m.rowsWritten.Add(float64(fr.Rows))
	// Fields without a column (structs and lists in format 2.1+) are
	// left out of the data file, as Lance does.
	cols := f.fw.FieldColumns()
	for i, fl := range f.schema.Fields {
		if cols[i] >= 0 {
			fr.Fields = append(fr.Fields, fl.ID)
			fr.Columns = append(fr.Columns, cols[i])
		}
	}
	return fr, nil
}

// Abort abandons the upload: the object never appears.
func (f *dataFile) Abort() { f.up.Abort(f.fw.Abort) }

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
		if s.merged != nil {
			return writers.Errorf(writers.ErrWrongState, "lance: %s is precommitted: a merge_insert takes no rows after its precommit; commit it, or roll back and replay", key)
		}
		return w.writeMerge(ctx, key, s, rec)
	}
	return w.writeRec(ctx, s, rec)
}

// writeRec writes the admitted rec (borrowed) into s's open data file,
// rolling it at the file limits, and before rec when its dictionaries
// would outgrow the file's index types (dataFile.Fits).
func (w *Writer) writeRec(ctx context.Context, s *stage, rec arrow.RecordBatch) error {
	if rec.NumRows() == 0 {
		return nil // its schema is admitted: an empty epoch still commits
	}
	if s.files == nil {
		s.files = w.newStaged(s)
	}
	return sendRows(ctx, s.files, rec)
}

// sendRows sends rec (borrowed) to files.
func sendRows(ctx context.Context, files *staged, rec arrow.RecordBatch) error {
	rec.Retain()
	return files.Send(ctx, tablesink.Part{Rec: rec})
}

// newStaged returns the encoder of s's data files.
func (w *Writer) newStaged(s *stage) *staged {
	rows, size := s.limits()
	ls, minor := s.schema, s.minor
	return tablesink.NewInline[*dataFile, fragment]("lance", w.budget, func(ctx context.Context, p tablesink.Part, slot func()) (*dataFile, error) {
		name := lancetable.NewDataFileName()
		up, err := tablesink.StartUpload(ctx, w.bucket, "lance", lancetable.DataKey(name), name, slot)
		if err != nil {
			return nil, err
		}
		fw, err := lancefile.NewFileWriter(up.Writer(), p.Rec.Schema(), ls, 0, minor)
		if err != nil {
			up.Abort(nil)
			return nil, err
		}
		return &dataFile{m: w.m, name: name, up: up, fw: fw, arrow: p.Rec.Schema(), schema: ls, minor: minor, rows: rows, size: size}, nil
	}, nil)
}

// openFile returns s's open data file.
func (s *stage) openFile() (*dataFile, bool) {
	if s.files == nil {
		return nil, false
	}
	return openFile(s.files)
}

// openFile returns the open data file of files.
func openFile(files *staged) (*dataFile, bool) { return files.Open(tablesink.Part{}) }

// finishFiles completes s's open data file and records its fragment.
func (w *Writer) finishFiles(s *stage) error {
	if s.files == nil {
		return nil
	}
	done, err := s.files.Finish()
	s.files = nil
	s.finished = append(s.finished, done...)
	return err
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
func (w *Writer) admit(ctx context.Context, got *arrow.Schema) (*lancefile.Schema, uint16, error) {
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
		minor := uint16(lancefile.DefaultFormat)
		if v := w.cfg.DataStorageVersion; v != "" {
			minor, _ = lancefile.ParseFormatVersion(v)
		}
		ls, err := lancefile.FromArrow(got)
		if err == nil {
			err = lancefile.CheckFormatTypes(got, minor)
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
	if err := d.Manifest.Schema.CheckLayouts(); err != nil {
		return nil, 0, err
	}
	return &d.Manifest.Schema, minor, lancefile.CheckFormatTypes(got, minor)
}

// Precommit finishes key's data files and returns the descriptor of their
// fragments (in merge_insert mode: runs the merge, see precommitMerge).
// They stay invisible until a Commit publishes them. A repeated call
// returns every fragment the key has precommitted so far (in merge_insert
// mode: the first merge's descriptor), as Delta's does: a transaction's
// precommit is retried when another participant failed it.
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
	if err := w.finishFiles(s); err != nil {
		return nil, err
	}
	s.precommitted = append(s.precommitted, s.finished...)
	s.finished = nil
	d := descriptor{Schema: s.schema, Fragments: s.precommitted}
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
	return w.dropFiles(ctx, s)
}

// dropFiles abandons s's open data file and deletes its finished ones
// (those in no descriptor).
func (w *Writer) dropFiles(ctx context.Context, s *stage) error {
	s.streamed = false
	s.stopOut()
	if s.files != nil {
		s.finished = append(s.finished, s.files.Abort()...)
		s.files = nil
	}
	var errs []error
	for _, f := range s.finished {
		if err := w.bucket.Delete(ctx, lancetable.DataKey(f.Path)); err != nil {
			errs = append(errs, fmt.Errorf("lance: delete staged file %s: %w", f.Path, err))
		}
	}
	s.finished = nil
	return errors.Join(errs...)
}

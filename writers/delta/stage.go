package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/parquetio"
)

// maxOpenFiles bounds the data files one key keeps open at once (one per
// partition it is writing). Past it every open file is finished, so memory
// stays bounded however many partitions a stream touches.
const maxOpenFiles = 32

// stage is what one key (a stream or a transaction on this server) has
// written: the encoders of its open files, finished files not yet handed
// out, and files handed out in a descriptor. Only the key's own calls use
// it, never concurrently (the writers.Writer contract), so it has no lock.
type stage struct {
	// schema is the Delta schemaString of the table columns the key's
	// files hold (the table's, the table's plus added columns, or before
	// the table exists the stream's own); "" until the first batch.
	schema string
	// admitted is the last Arrow schema checked against the table, so a
	// stream's batches are checked once.
	admitted *arrow.Schema
	// missing is the table columns admitted lacks (nullable), written as
	// nulls.
	missing []arrow.Field
	// pool encodes the key's batches; nil until the first rows and after
	// a precommit.
	pool *encoderPool
	// finished files are durable but in no descriptor yet: Rollback may
	// delete them, as no commit can reference them.
	finished []addFile
	// precommitted files are in a descriptor: they are never deleted here,
	// as a commit (this server's or another's) may still publish them.
	precommitted []addFile
	// layout is how the key's files are written (statistics, names).
	layout *fileLayout
	// upsert holds an upsert key's changelog (mode upsert only).
	upsert *upsertStage
	// identity fills the table's identity columns (nil without).
	identity *identityFill
	// mappedAfter is descriptor.MappedAfter.
	mappedAfter *int64
}

// fileSet is the data files of one encoder: at most one open file per
// partition directory, and the files it finished.
type fileSet struct {
	open     map[string]*dataFile // by partition directory ("" unpartitioned)
	finished []addFile
	layout   *fileLayout // statistics columns and column mapping of the files
	// target rolls files at this many bytes instead of target_file_bytes
	// (optimize's target); 0 means target_file_bytes.
	target int64
	// base is the file writer slot (limits.max_open_files) the set keeps
	// until abortAll, so that it never waits for one again; baseBusy
	// while one of its files has it.
	base     func()
	baseBusy bool
}

func newFileSet(layout *fileLayout) fileSet {
	return fileSet{open: make(map[string]*dataFile), layout: layout}
}

// dataFile is one Parquet file being streamed to storage.
type dataFile struct {
	key       string             // storage key (decoded path)
	path      string             // add.path (URI-encoded)
	partition map[string]*string // add.partitionValues
	schema    *arrow.Schema      // the file's Arrow schema (physical names, partition columns removed)
	layout    *fileLayout
	cancel    context.CancelFunc // abandons the upload
	out       io.WriteCloser
	pw        *parquetio.Writer
	slot      func() // gives back the file's slot (limits.max_open_files)
}

// newDataFile starts a file under dir ("" or "k=v/", already escaped for
// storage), with statistics for the columns of stats, in one of the
// process's file writer slots. The upload outlives the Write call that
// starts it, so it runs under its own context, cancelled by abort.
func (w *Writer) newDataFile(ctx context.Context, dir string, partition map[string]*string, schema *arrow.Schema, layout *fileLayout, slot func()) (*dataFile, error) {
	name := fmt.Sprintf("part-00000-%s-c000.%s.parquet", uuid.NewString(), w.cfg.Parquet.Compression)
	if w.cfg.Parquet.Compression == CodecNone {
		name = fmt.Sprintf("part-00000-%s-c000.parquet", uuid.NewString())
	}
	key := dir + name
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	out, err := w.bucket.NewWriter(fctx, key)
	if err != nil {
		cancel()
		slot()
		return nil, fmt.Errorf("delta: start data file %s: %w", key, err)
	}
	pw, err := parquetio.NewWriter(out, schema, parquetio.Options{
		Compression:  w.cfg.Parquet.Compression,
		RowGroupRows: int64(w.cfg.Parquet.RowGroupRows),
	})
	if err != nil {
		cancel()
		out.Close()
		slot()
		return nil, fmt.Errorf("delta: data file %s: %w", key, err)
	}
	return &dataFile{key: key, path: deltalog.EncodePath(key), partition: partition, schema: schema, layout: layout, cancel: cancel, out: out, pw: pw, slot: slot}, nil
}

// fileSlot takes a file writer slot for a new file of s: its base when
// free, else another when one is free, else s finishes its own files,
// which frees its base. A set without a base waits for one only after
// finishing its files, holding no slot: slots held while waiting could
// deadlock with the encoders waiting for them.
func (w *Writer) fileSlot(ctx context.Context, s *fileSet) (func(), error) {
	if s.base != nil && !s.baseBusy {
		return s.takeBase(), nil
	}
	if slot, ok := w.budget.TryOpenFile(); ok {
		return slot, nil
	}
	if err := w.finishAll(s); err != nil {
		return nil, err
	}
	if s.base == nil {
		base, err := w.budget.OpenFile(ctx)
		if err != nil {
			return nil, fmt.Errorf("delta: open a data file: %w", err)
		}
		s.base = base
	}
	return s.takeBase(), nil
}

// takeBase gives s's base slot to a new file.
func (s *fileSet) takeBase() func() {
	s.baseBusy = true
	return func() { s.baseBusy = false }
}

// finish writes the footer, publishes the object and returns its add
// action (stats computed from the Arrow data written).
func (w *Writer) finishFile(f *dataFile) (addFile, error) {
	defer f.slot()
	defer f.cancel()
	st, err := f.pw.Close()
	if err != nil {
		f.cancel()
		f.out.Close()
		return addFile{}, fmt.Errorf("delta: finish data file %s: %w", f.key, err)
	}
	if err := f.out.Close(); err != nil {
		return addFile{}, fmt.Errorf("delta: upload data file %s: %w", f.key, err)
	}
	stats, err := fileStatsJSON(st, f.schema, f.layout)
	if err != nil {
		return addFile{}, err
	}
	w.m.filesWritten.Inc()
	w.m.bytesWritten.Add(float64(st.Bytes))
	return addFile{
		Path:             f.path,
		PartitionValues:  f.partition,
		Size:             st.Bytes,
		ModificationTime: time.Now().UnixMilli(),
		DataChange:       true,
		Stats:            stats,
		Rows:             st.Rows,
	}, nil
}

// abort abandons the upload: the object never appears.
func (f *dataFile) abort() {
	defer f.slot()
	f.cancel()
	f.pw.Close() // releases buffers; its error is moot once cancelled
	f.out.Close()
}

// write appends part (rows of one partition, partition columns removed,
// logical column names) to the set's file for dir, starting one when
// needed and rolling it at the target size or when the Arrow schema
// changes (a second stream of the same transaction may send, e.g.,
// dictionary strings instead of plain). partition is add.partitionValues
// (physical names). The file holds the physical names (columnMap).
func (w *Writer) write(ctx context.Context, s *fileSet, dir string, partition map[string]*string, part arrow.RecordBatch) error {
	part, err := s.layout.cols.toPhysical(part)
	if err != nil {
		return err
	}
	defer part.Release()
	f := s.open[dir]
	if f != nil && !f.schema.Equal(part.Schema()) {
		if err := w.finishOpen(s, dir); err != nil {
			return err
		}
		f = nil
	}
	if f == nil {
		if len(s.open) >= maxOpenFiles {
			if err := w.finishAll(s); err != nil {
				return err
			}
		}
		slot, err := w.fileSlot(ctx, s)
		if err != nil {
			return err
		}
		if f, err = w.newDataFile(ctx, dir, partition, part.Schema(), s.layout, slot); err != nil {
			return err
		}
		s.open[dir] = f
	}
	if err := f.pw.Write(part); err != nil {
		return fmt.Errorf("delta: encode rows into %s: %w", f.key, err)
	}
	target := w.cfg.TargetFileBytes
	if s.target > 0 {
		target = s.target
	}
	if f.pw.BytesWritten() >= target {
		return w.finishOpen(s, dir)
	}
	return nil
}

// finishOpen finishes the open file of dir and records it as finished.
func (w *Writer) finishOpen(s *fileSet, dir string) error {
	f := s.open[dir]
	delete(s.open, dir)
	a, err := w.finishFile(f)
	if err != nil {
		return err
	}
	s.finished = append(s.finished, a)
	return nil
}

// finishAll finishes every open file.
func (w *Writer) finishAll(s *fileSet) error {
	var errs []error
	for dir := range s.open {
		errs = append(errs, w.finishOpen(s, dir))
	}
	return errors.Join(errs...)
}

// abortAll abandons every open file of the set and gives back its base
// slot: the set is done.
func (s *fileSet) abortAll() {
	for dir, f := range s.open {
		f.abort()
		delete(s.open, dir)
	}
	if s.base != nil {
		s.base()
		s.base = nil
	}
}

// discard abandons the open files and deletes the finished ones that no
// descriptor names. Precommitted files stay: a commit may publish them
// (a vacuum reclaims them if none does).
func (w *Writer) discard(ctx context.Context, s *stage) error {
	if s.upsert != nil {
		s.upsert.release()
	}
	if s.pool != nil {
		s.finished = append(s.finished, s.pool.abort()...)
		s.pool = nil
	}
	var errs []error
	for _, a := range s.finished {
		key, err := deltalog.DecodePath(a.Path)
		if err == nil {
			err = w.bucket.Delete(ctx, key)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("delta: delete staged file %s: %w", a.Path, err))
		}
	}
	s.finished = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w (the files are unreferenced; a vacuum reclaims them): %w", err, writers.ErrUnavailable)
	}
	return nil
}

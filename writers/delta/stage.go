package delta

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/parquetio"
	"github.com/quiver-ingest/quiver/writers/tablesink"
)

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
	pool *tablesink.Staged[*dataFile, addFile]
	// finished files are durable but in no descriptor yet: Rollback may
	// delete them, as no commit can reference them.
	finished []addFile
	// precommitted files are in a descriptor: they are never deleted here,
	// as a commit (this server's or another's) may still publish them.
	precommitted []addFile
	// layout is how the key's files are written (statistics, names).
	layout *deltalayout.Layout
	// checked is the constraints the key's rows were checked against
	// (CheckedConstraints), set by the admit of its first rows: a
	// re-admit under other constraints is a conflict (admitStage).
	checked map[string]string
	// upsert holds an upsert key's changelog (mode upsert only).
	upsert *upsertStage
	// identity fills the table's identity columns (nil without).
	identity *deltalayout.IdentityFill
	// mappedAfter is descriptor.MappedAfter.
	mappedAfter *int64
}

// fileSet is the data files of rows of layout that optimize and upsert
// rewrites write outside a key's pool (tablesink.Files).
type fileSet struct {
	*tablesink.Files[*dataFile, addFile]
	layout *deltalayout.Layout
}

// newFileSet returns an empty set of files with layout, rolled at target
// bytes (0: target_file_bytes; optimize's target otherwise).
func (w *Writer) newFileSet(layout *deltalayout.Layout, target int64) fileSet {
	return fileSet{tablesink.NewFiles[*dataFile, addFile]("delta", w.budget, w.fileStarter(layout, target)), layout}
}

// dataFile is one Parquet file being streamed to storage.
type dataFile struct {
	m         *metrics
	key       string             // storage key (decoded path)
	path      string             // add.path (URI-encoded)
	partition map[string]*string // add.partitionValues
	schema    *arrow.Schema      // the file's Arrow schema (physical names, partition columns removed)
	layout    *deltalayout.Layout
	target    int64 // the file is finished at this many bytes
	up        *tablesink.Upload
	pw        *parquetio.Writer
}

// fileStarter returns the function starting a file of rows of a
// partition (p.Dir "" or "k=v/", already escaped for storage; p.Values
// add.partitionValues) with the statistics and names of layout, rolled at
// target bytes (0: target_file_bytes).
func (w *Writer) fileStarter(layout *deltalayout.Layout, target int64) tablesink.Create[*dataFile] {
	if target <= 0 {
		target = w.cfg.TargetFileBytes
	}
	return func(ctx context.Context, p tablesink.Part, slot func()) (*dataFile, error) {
		name := fmt.Sprintf("part-00000-%s-c000.%s.parquet", uuid.NewString(), w.cfg.Parquet.Compression)
		if w.cfg.Parquet.Compression == CodecNone {
			name = fmt.Sprintf("part-00000-%s-c000.parquet", uuid.NewString())
		}
		key := p.Dir + name
		up, err := tablesink.StartUpload(ctx, w.bucket, "delta", key, key, slot)
		if err != nil {
			return nil, err
		}
		schema := p.Rec.Schema()
		pw, err := parquetio.NewWriter(up.Writer(), schema, parquetio.Options{
			Compression:   w.cfg.Parquet.Compression,
			RowGroupRows:  int64(w.cfg.Parquet.RowGroupRows),
			DeltaIntegers: w.cfg.Parquet.IntegerEncoding == IntegersDelta,
		})
		if err != nil {
			up.Abort(nil)
			return nil, fmt.Errorf("delta: data file %s: %w", key, err)
		}
		return &dataFile{m: w.m, key: key, path: deltalog.EncodePath(key), partition: p.Values, schema: schema, layout: layout, target: target, up: up, pw: pw}, nil
	}
}

func (f *dataFile) Fits(rec arrow.RecordBatch) bool { return f.schema.Equal(rec.Schema()) }
func (f *dataFile) Buffered() int64                 { return f.pw.Buffered() }
func (f *dataFile) Full() bool                      { return f.pw.BytesWritten() >= f.target }

func (f *dataFile) Name() string                      { return f.key }
func (f *dataFile) Write(rec arrow.RecordBatch) error { return f.pw.Write(rec) }

// Flush writes out the open row group.
func (f *dataFile) Flush() error { return f.pw.FlushRowGroup() }

// Finish writes the footer, publishes the object and returns its add
// action (stats computed from the Arrow data written).
func (f *dataFile) Finish() (addFile, error) {
	var st parquetio.FileStats
	var stats string
	// The stats are built before the object is published: a file they
	// fail for is abandoned, not left in storage in no descriptor.
	if err := f.up.Close(func() (err error) {
		if st, err = f.pw.Close(); err != nil {
			return err
		}
		stats, err = deltalayout.FileStatsJSON(st, f.schema, f.layout)
		return err
	}); err != nil {
		return addFile{}, err
	}
	f.m.filesWritten.Inc()
	f.m.bytesWritten.Add(float64(st.Bytes))
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

// Abort abandons the upload: the object never appears.
func (f *dataFile) Abort() {
	f.up.Abort(func() { f.pw.Close() }) // releases buffers; its error is moot once cancelled
}

// write appends part (rows of one partition, partition columns removed,
// logical column names) to s's file for dir (tablesink.Files.Write).
// partition is add.partitionValues (physical names).
func (w *Writer) write(ctx context.Context, s *fileSet, dir string, partition map[string]*string, part arrow.RecordBatch) error {
	return writePhysical(ctx, s.Files, s.layout.Cols, tablesink.Part{Dir: dir, Values: partition, Rec: part})
}

// writePhysical writes p (borrowed) into files with the physical column
// names of cols (ColumnMap).
func writePhysical(ctx context.Context, files *tablesink.Files[*dataFile, addFile], cols *deltalayout.ColumnMap, p tablesink.Part) error {
	rec, err := cols.ToPhysical(p.Rec)
	if err != nil {
		return err
	}
	defer rec.Release()
	p.Rec = rec
	return files.Write(ctx, p)
}

// discard abandons the open files and deletes the finished ones that no
// descriptor names. Precommitted files stay: a commit may publish them
// (a vacuum reclaims them if none does).
func (w *Writer) discard(ctx context.Context, s *stage) error {
	if s.upsert != nil {
		s.upsert.release()
	}
	if s.pool != nil {
		s.finished = append(s.finished, s.pool.Abort()...)
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

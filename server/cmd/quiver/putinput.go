package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/quiver-ingest/quiver/writers"
)

// parquetBatchRows is the batch size Parquet inputs are read in.
const parquetBatchRows = 65536

var (
	magicIPCFile = []byte("ARROW1")
	magicParquet = []byte("PAR1")
)

// input is one opened input file.
type input struct {
	path   string
	format string // "arrow-file", "arrow-stream" or "parquet"
	rdr    array.RecordReader
	// rows is the file's row count, or -1 when unknown up front (IPC
	// streams, and IPC files unless counted).
	rows  int64
	close func() error
}

// openInput opens path and picks its reader by magic bytes, not by
// extension: "ARROW1" is the Arrow IPC file format, "PAR1" Parquet, and
// anything else is read as an Arrow IPC stream. IPC files have their rows
// counted only if countRows (it reads every batch once).
func openInput(ctx context.Context, path string, mem memory.Allocator, countRows bool) (*input, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	in, err := newInput(ctx, f, mem, countRows)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	in.path = path
	closeReader := in.close
	in.close = func() error { return errors.Join(closeReader(), f.Close()) }
	return in, nil
}

func newInput(ctx context.Context, f *os.File, mem memory.Allocator, countRows bool) (*input, error) {
	head := make([]byte, len(magicIPCFile))
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	head = head[:n]
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	switch {
	case bytes.HasPrefix(head, magicIPCFile):
		fr, err := ipc.NewFileReader(f, ipc.WithAllocator(mem))
		if err != nil {
			return nil, fmt.Errorf("read Arrow IPC file: %w", err)
		}
		in := &input{format: "arrow-file", rdr: newFileRecords(fr), rows: -1, close: fr.Close}
		if countRows {
			if in.rows, err = countFileRows(fr); err != nil {
				_ = fr.Close()
				return nil, fmt.Errorf("read Arrow IPC file: %w", err)
			}
		}
		return in, nil
	case bytes.HasPrefix(head, magicParquet):
		pf, err := file.NewParquetReader(f)
		if err != nil {
			return nil, fmt.Errorf("read Parquet file: %w", err)
		}
		// pf needs no Close of its own: that would only close f, which
		// openInput does.
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: parquetBatchRows}, mem)
		if err != nil {
			return nil, fmt.Errorf("read Parquet file: %w", err)
		}
		rr, err := fr.GetRecordReader(ctx, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("read Parquet file: %w", err)
		}
		return &input{format: "parquet", rdr: rr, rows: pf.NumRows(), close: func() error { rr.Release(); return nil }}, nil
	default:
		r, err := ipc.NewReader(f, ipc.WithAllocator(mem))
		if err != nil {
			return nil, fmt.Errorf("not an Arrow IPC file (no ARROW1 magic), not Parquet (no PAR1 magic), and not an Arrow IPC stream: %w", err)
		}
		return &input{format: "arrow-stream", rdr: r, rows: -1, close: func() error { r.Release(); return nil }}, nil
	}
}

// countFileRows reads every batch of fr once for its row count.
func countFileRows(fr *ipc.FileReader) (int64, error) {
	var rows int64
	for i := range fr.NumRecords() {
		rec, err := fr.RecordBatchAt(i)
		if err != nil {
			return 0, err
		}
		rows += rec.NumRows()
		rec.Release()
	}
	return rows, nil
}

// fileRecords is an array.RecordReader over the batches of an IPC file.
// Each batch is owned by the FileReader and valid until the next Next.
// Retain and Release do nothing: the input closes the FileReader.
type fileRecords struct {
	fr   *ipc.FileReader
	next int
	cur  arrow.RecordBatch
	err  error
}

func newFileRecords(fr *ipc.FileReader) *fileRecords { return &fileRecords{fr: fr} }

func (r *fileRecords) Schema() *arrow.Schema          { return r.fr.Schema() }
func (r *fileRecords) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *fileRecords) Record() arrow.RecordBatch      { return r.cur }
func (r *fileRecords) Err() error                     { return r.err }
func (r *fileRecords) Retain()                        {}
func (r *fileRecords) Release()                       {}

func (r *fileRecords) Next() bool {
	r.cur = nil
	if r.err != nil || r.next >= r.fr.NumRecords() {
		return false
	}
	r.cur, r.err = r.fr.RecordBatch(r.next)
	r.next++
	return r.err == nil
}

// inputs is one stream made of several files that share a schema: an
// array.RecordReader over every batch of every file, in order. A file
// whose schema differs from the first only in metadata (or is non-nullable
// where the first is nullable) has its batches rebound to the first
// file's schema, since a Flight stream has one schema. Retain and Release
// do nothing: close closes the files.
type inputs struct {
	files  []*input
	schema *arrow.Schema
	i      int
	cur    arrow.RecordBatch
	owned  arrow.RecordBatch // cur, when rebound by us; released on Next
	err    error
}

// openInputs opens every path and checks that they share one schema,
// before anything is sent. The caller closes the result.
func openInputs(ctx context.Context, paths []string, mem memory.Allocator, countRows bool) (*inputs, error) {
	ins := &inputs{}
	for _, p := range paths {
		in, err := openInput(ctx, p, mem, countRows)
		if err != nil {
			return nil, errors.Join(err, ins.close())
		}
		ins.files = append(ins.files, in)
		if ins.schema == nil {
			ins.schema = in.rdr.Schema()
			continue
		}
		if diff := writers.SchemaMismatch(ins.schema, in.rdr.Schema()); diff != "" {
			err := fmt.Errorf("%s: its schema differs from %s's (%s); all files of one put must share a schema, so send it with a separate put",
				p, ins.files[0].path, diff)
			return nil, errors.Join(err, ins.close())
		}
	}
	return ins, nil
}

// rows returns the total row count, or -1 when a file's is unknown.
func (s *inputs) rows() int64 {
	var total int64
	for _, in := range s.files {
		if in.rows < 0 {
			return -1
		}
		total += in.rows
	}
	return total
}

func (s *inputs) close() error {
	s.releaseOwned()
	var errs []error
	for _, in := range s.files {
		errs = append(errs, in.close())
	}
	return errors.Join(errs...)
}

func (s *inputs) Schema() *arrow.Schema          { return s.schema }
func (s *inputs) RecordBatch() arrow.RecordBatch { return s.cur }
func (s *inputs) Record() arrow.RecordBatch      { return s.cur }
func (s *inputs) Err() error                     { return s.err }
func (s *inputs) Retain()                        {}
func (s *inputs) Release()                       {}

func (s *inputs) Next() bool {
	s.releaseOwned()
	s.cur = nil
	for s.err == nil && s.i < len(s.files) {
		in := s.files[s.i]
		if in.rdr.Next() {
			rec := in.rdr.RecordBatch()
			if !rec.Schema().Equal(s.schema) {
				s.owned = array.NewRecordBatch(s.schema, rec.Columns(), rec.NumRows())
				rec = s.owned
			}
			s.cur = rec
			return true
		}
		if err := in.rdr.Err(); err != nil {
			s.err = fmt.Errorf("%s (%s): %w", in.path, in.format, err)
			return false
		}
		s.i++
	}
	return false
}

func (s *inputs) releaseOwned() {
	if s.owned != nil {
		s.owned.Release()
		s.owned = nil
	}
}

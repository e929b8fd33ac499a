package delta

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/quiver-ingest/quiver/writers"
)

// maxEncoders caps the encoder goroutines of one key.
const maxEncoders = 4

// encodeJob is rows of one partition for an encoder; the job owns rec,
// whose size is held on the memory budget until it is encoded.
type encodeJob struct {
	dir    string
	values map[string]*string
	rec    arrow.RecordBatch
	size   int64
}

// encoderPool encodes one key's batches on up to GOMAXPROCS goroutines
// (at most maxEncoders), each with its own open file per partition, so
// that a single stream uses every core: Parquet encoding, not receiving,
// is what bounds a stream. Keys that start while others encode take only
// the cores left (at least one encoder): concurrent streams already use
// every core, and more encoders would only mean more, smaller files.
// Batches go round-robin to the encoders through
// one-slot queues; rows may land in any of the key's files, which Delta
// does not mind (a commit is a set of files).
//
// Memory: queued batches (writers.MemoryQueued) and each encoder's
// buffered row groups (writers.MemoryEncoder) are held on the server's
// memory budget; under pressure
// an encoder flushes its row groups after each batch instead of letting
// them grow to parquet.row_group_rows.
//
// send is called by the key's Write only; finish and abort by its
// Precommit, Rollback or Close, never concurrently with send.
type encoderPool struct {
	w       *Writer
	ctx     context.Context // cancelled by abort: encoders drop what is queued
	cancel  context.CancelFunc
	workers []*encoder
	next    int
	wg      sync.WaitGroup

	mu  sync.Mutex // guards err
	err error      // first encoding or upload failure
}

// encoder is one goroutine's queue and files. files and held belong to
// the goroutine until the pool's WaitGroup is done.
type encoder struct {
	in    chan encodeJob
	files fileSet
	held  int64 // buffered bytes of files held on the budget
}

// account brings what e holds on the budget up to date with its files.
func (e *encoder) account(budget writers.MemoryCharger) {
	var now int64
	for _, f := range e.files.open {
		now += f.pw.Buffered()
	}
	budget.Hold(writers.MemoryEncoder, now-e.held)
	e.held = now
}

// relieve flushes e's row groups when the budget is under pressure.
func (e *encoder) relieve(budget writers.MemoryCharger) error {
	if !budget.Pressure() {
		return nil
	}
	for _, f := range e.files.open {
		if err := f.pw.FlushRowGroup(); err != nil {
			return fmt.Errorf("delta: encode rows into %s: %w", f.key, err)
		}
	}
	e.account(budget)
	return nil
}

// newEncoderPool starts the encoders of a key.
//
// Every encoder keeps a file writer slot (its files' base, see fileSlot):
// the first waits for one (up to limits.admission_timeout, before the key
// holds anything), the others exist only if a slot is free, so that a
// key's own encoders never wait for slots their siblings hold.
func (w *Writer) newEncoderPool(ctx context.Context, layout *fileLayout) (*encoderPool, error) {
	first, err := w.budget.OpenFile(ctx)
	if err != nil {
		return nil, fmt.Errorf("delta: open a data file: %w", err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	p := &encoderPool{w: w, ctx: pctx, cancel: cancel}
	// Other keys encoding at the same time already share the cores.
	n := min(runtime.GOMAXPROCS(0), maxEncoders) - int(w.encodingKeys.Add(1)-1)
	for i := range max(n, 1) {
		base, ok := first, true
		if i > 0 {
			base, ok = w.budget.TryOpenFile()
		}
		if !ok {
			break
		}
		e := &encoder{in: make(chan encodeJob, 1), files: newFileSet(layout)}
		e.files.base = base
		p.workers = append(p.workers, e)
		p.wg.Go(func() { p.run(e) })
	}
	return p, nil
}

// run encodes e's jobs until its queue is closed. After a failure, or
// once the pool is aborted, it only releases what it receives: it must
// keep receiving, or send would block.
func (p *encoderPool) run(e *encoder) {
	budget := p.w.budget
	for j := range e.in {
		if p.ctx.Err() == nil && p.failed() == nil {
			if err := p.encode(e, j); err != nil {
				p.fail(err)
			}
		}
		j.rec.Release()
		budget.Hold(writers.MemoryQueued, -j.size)
	}
}

// encode writes j into e's files. A panic (a batch the encoder cannot
// handle) fails the key, not the process: this goroutine is the sink's.
func (p *encoderPool) encode(e *encoder, j encodeJob) (err error) {
	defer writers.Recover(&err)
	defer e.account(p.w.budget)
	if err := p.w.write(p.ctx, &e.files, j.dir, j.values, j.rec); err != nil {
		return err
	}
	e.account(p.w.budget)
	return e.relieve(p.w.budget)
}

// send queues j on the next encoder, blocking while it is busy. It owns
// j.rec: on ctx's end it releases it and returns the context's error.
// Once queued, j.rec outlives the Write that sent it: it is held on the
// memory budget until encoded.
func (p *encoderPool) send(ctx context.Context, j encodeJob) error {
	e := p.workers[p.next]
	p.next = (p.next + 1) % len(p.workers)
	j.size = util.TotalRecordSize(j.rec)
	p.w.budget.Hold(writers.MemoryQueued, j.size)
	select {
	case e.in <- j:
		return nil
	case <-ctx.Done():
		j.rec.Release()
		p.w.budget.Hold(writers.MemoryQueued, -j.size)
		return fmt.Errorf("delta: write: %w", ctx.Err())
	}
}

func (p *encoderPool) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

// failed returns the first encoding or upload failure, if any.
func (p *encoderPool) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// stop closes the queues and waits for the encoders to drain them.
func (p *encoderPool) stop() {
	for _, e := range p.workers {
		close(e.in)
	}
	p.wg.Wait()
	p.w.encodingKeys.Add(-1)
}

// finish encodes everything queued, finishes every open file and returns
// all finished files. On a failure it abandons the open files and returns
// the finished ones with the error (they are unreferenced: the caller
// deletes them on rollback).
func (p *encoderPool) finish() ([]addFile, error) {
	p.stop()
	defer p.cancel()
	err := p.failed()
	var files []addFile
	for _, e := range p.workers {
		if err == nil {
			err = p.w.finishAll(&e.files)
		}
		e.files.abortAll()
		e.account(p.w.budget)
		files = append(files, e.files.finished...)
	}
	return files, err
}

// abort drops what is queued, abandons the open files and returns the
// files already finished (for the caller to delete).
func (p *encoderPool) abort() []addFile {
	p.cancel()
	p.stop()
	var files []addFile
	for _, e := range p.workers {
		e.files.abortAll()
		e.account(p.w.budget)
		files = append(files, e.files.finished...)
	}
	return files
}

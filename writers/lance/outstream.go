package lance

import (
	"context"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
)

// outQueue bounds the batches a stage's outStream holds queued: beyond
// it, Write waits for the encoder.
const outQueue = 64

// outStream writes a merge's guessed output into a stage's data files on
// its own goroutine, batch by batch as the source arrives (see
// streamOut). While it runs, the files are its own: it touches nothing
// else of the stage, and every other use of the files waits for it first
// (stage.awaitOut, stage.stopOut).
type outStream struct {
	recs   chan arrow.RecordBatch
	cancel context.CancelFunc
	done   chan struct{}
	err    error       // the first write's error; later batches are dropped
	failed atomic.Bool // err is set (read by the queuing stream)
}

// startOutStream starts writing s's files (opened now, if none is) from
// the queue. Its writes outlive the stream that queues them (a
// transaction's precommit may come on another call): only stopOut cancels
// them.
func (w *Writer) startOutStream(ctx context.Context, s *stage) *outStream {
	if s.files == nil {
		s.files = w.newStaged(s)
	}
	files := s.files
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	o := &outStream{recs: make(chan arrow.RecordBatch, outQueue), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		for rec := range o.recs {
			if o.err == nil {
				// Guarded: a panic on this goroutine fails the writes.
				o.err = writers.Guard(func() error {
					if err := sendRows(ctx, files, rec); err != nil {
						return err
					}
					if len(o.recs) == 0 {
						return flushIdle(files)
					}
					return nil
				})()
				o.failed.Store(o.err != nil)
			}
			rec.Release()
		}
	}()
	return o
}

// send queues rec (borrowed) and reports whether it could before ctx, the
// queuing stream's, ended.
func (o *outStream) send(ctx context.Context, rec arrow.RecordBatch) bool {
	rec.Retain()
	select {
	case o.recs <- rec:
		return true
	case <-ctx.Done():
		rec.Release()
		return false
	}
}

// minIdlePage is the least Arrow data a stage's open file must hold for
// flushIdle to cut it into a page early.
const minIdlePage = lancefile.DefaultPageBytes / 4

// flushIdle cuts what the open file of files holds into a page while no
// batch is queued: the encoder would wait for the next batch anyway, and
// the rows encoded now are rows Precommit does not wait for. Pages then
// end at the stream's batches rather than at DefaultPageBytes, but no
// smaller than minIdlePage.
func flushIdle(files *staged) error {
	f, ok := openFile(files)
	if !ok || f.Buffered() < minIdlePage {
		return nil
	}
	return f.Flush()
}

// awaitOut waits for the queued writes of s's outStream (none: nil) and
// returns their error; s's files are the caller's again.
func (s *stage) awaitOut() error {
	o := s.out
	if o == nil {
		return nil
	}
	s.out = nil
	close(o.recs)
	<-o.done
	o.cancel()
	return o.err
}

// stopOut cancels the writes of s's outStream and waits for it.
func (s *stage) stopOut() {
	if s.out != nil {
		s.out.cancel()
		s.awaitOut() //nolint:errcheck // cancelled: the files are dropped
	}
}

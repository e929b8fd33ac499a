package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/quiver-ingest/quiver/bench/workload"
	quiver "github.com/quiver-ingest/quiver/clients/go"
)

// Result is one measured run: streams concurrent Puts of the same batches
// over one connection.
type Result struct {
	// Target is "quiver" or "baseline".
	Target  string `json:"target"`
	Streams int    `json:"streams"`
	// Rows and Bytes (IPC body) sent by all streams together.
	Rows       int64   `json:"rows"`
	Bytes      int64   `json:"ipc_body_bytes"`
	Seconds    float64 `json:"seconds"`
	RowsPerSec float64 `json:"rows_per_s"`
	MBPerSec   float64 `json:"ipc_body_mb_per_s"`
	// AckP50/AckP99: time from sending a batch to receiving its ack,
	// over every batch of every stream.
	AckP50 Millis `json:"ack_p50_ms"`
	AckP99 Millis `json:"ack_p99_ms"`
	// CommitP50/CommitMax: time from the end of a stream's sending to its
	// final (committed) ack, over the streams.
	CommitP50 Millis `json:"commit_p50_ms"`
	CommitMax Millis `json:"commit_max_ms"`
}

// Millis is a duration that reads (and marshals) as milliseconds.
type Millis time.Duration

// MarshalJSON writes milliseconds with microsecond precision.
func (m Millis) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, "%.3f", float64(m)/float64(time.Millisecond)), nil
}

// UnmarshalJSON reads milliseconds.
func (m *Millis) UnmarshalJSON(b []byte) error {
	ms, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("bench: milliseconds %s: %w", b, err)
	}
	*m = Millis(ms * float64(time.Millisecond))
	return nil
}

func (m Millis) String() string { return time.Duration(m).Round(10 * time.Microsecond).String() }

// load is the pre-generated data every stream sends.
type load struct {
	schema  *arrow.Schema
	batches []arrow.RecordBatch
	rows    int64 // per stream
	bytes   int64 // IPC body bytes per stream
}

// newWorkload generates the batches and sizes them once, before any
// timing, so that neither cost is measured.
func newWorkload(mem memory.Allocator, seed uint64, rows int64, batchRows int) (*load, error) {
	batches, err := workload.Generate(mem, seed, rows, batchRows)
	if err != nil {
		return nil, err
	}
	bytes, err := workload.TotalIPCBodyBytes(mem, batches)
	if err != nil {
		workload.ReleaseAll(batches)
		return nil, err
	}
	return &load{schema: workload.Schema(), batches: batches, rows: rows, bytes: bytes}, nil
}

func (w *load) release() { workload.ReleaseAll(w.batches) }

// streamStats is what one stream measured.
type streamStats struct {
	acks   []time.Duration
	commit time.Duration
}

// measure runs streams concurrent Puts of w to endpoint over c and
// reports throughput and latencies.
func measure(ctx context.Context, target string, c *quiver.Client, endpoint string, w *load, streams int) (Result, error) {
	stats := make([]streamStats, streams)
	g, gctx := errgroup.WithContext(ctx)
	start := time.Now()
	for i := range stats {
		g.Go(func() error {
			var err error
			stats[i], err = putStream(gctx, c, endpoint, w, start)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return Result{}, fmt.Errorf("bench: %s, %d streams: %w", target, streams, err)
	}
	elapsed := time.Since(start)

	var acks, commits []time.Duration
	for _, s := range stats {
		acks = append(acks, s.acks...)
		commits = append(commits, s.commit)
	}
	rows, bytes := w.rows*int64(streams), w.bytes*int64(streams)
	return Result{
		Target:     target,
		Streams:    streams,
		Rows:       rows,
		Bytes:      bytes,
		Seconds:    elapsed.Seconds(),
		RowsPerSec: float64(rows) / elapsed.Seconds(),
		MBPerSec:   float64(bytes) / 1e6 / elapsed.Seconds(),
		AckP50:     Millis(Percentile(acks, 50)),
		AckP99:     Millis(Percentile(acks, 99)),
		CommitP50:  Millis(Percentile(commits, 50)),
		CommitMax:  Millis(slices.Max(commits)),
	}, nil
}

// putStream sends w as one auto-commit Put and records, per batch, the
// time from its send to its ack, and the time from the end of sending to
// the final ack. Times are offsets from base (monotonic).
func putStream(ctx context.Context, c *quiver.Client, endpoint string, w *load, base time.Time) (streamStats, error) {
	r, err := array.NewRecordReader(w.schema, w.batches)
	if err != nil {
		return streamStats{}, err
	}
	defer r.Release()
	// sent is written by the sending goroutine and read by the receiving
	// one; the network between them is no happens-before edge, so atomics.
	sent := make([]atomic.Int64, len(w.batches))
	acks := make([]time.Duration, 0, len(w.batches))
	var sendDone time.Duration
	trace := quiver.PutTrace{
		BatchSend: func(i int, _ int64) { sent[i].Store(int64(time.Since(base))) },
		SendDone:  func() { sendDone = time.Since(base) },
		BatchAck: func(a quiver.BatchAck) {
			if a.Index < len(sent) {
				acks = append(acks, time.Since(base)-time.Duration(sent[a.Index].Load()))
			}
		},
	}
	if _, err := c.Put(ctx, endpoint, r, quiver.WithTrace(trace)); err != nil {
		return streamStats{}, err
	}
	// acks and sendDone are safe to read: Put has joined its receiving
	// goroutine and SendDone ran on this one.
	return streamStats{acks: acks, commit: time.Since(base) - sendDone}, nil
}

package bench

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/bench/workload"
	quiver "github.com/quiver-ingest/quiver/clients/go"
)

// Putter puts the standard workload to the endpoints of a running server,
// measurement after measurement. NewPutter generates the batches and
// connects once, so that Measure times the puts alone: for scenarios that
// interleave Quiver with other clients and account for every measurement
// themselves (bench/scenario/kafka). The first Measure of an endpoint
// pays for connecting and first calls: make it an unmeasured warm-up.
type Putter struct {
	w *load
	c *quiver.Client
}

// NewPutter generates rows rows per stream of the standard workload and
// connects to the server at addr.
func NewPutter(addr string, rows int64) (*Putter, error) {
	w, err := newWorkload(memory.DefaultAllocator, workload.DefaultSeed, rows, workload.DefaultBatchRows)
	if err != nil {
		return nil, err
	}
	c, err := quiver.Dial(addr)
	if err != nil {
		w.release()
		return nil, err
	}
	return &Putter{w: w, c: c}, nil
}

// Measure puts the workload to endpoint once on each of streams
// concurrent auto-commit streams, until every commit is acknowledged.
func (p *Putter) Measure(ctx context.Context, endpoint string, streams int) (Result, error) {
	return measure(ctx, targetQuiver, p.c, endpoint, p.w, streams)
}

// Close releases the batches and closes the connection.
func (p *Putter) Close() error {
	p.w.release()
	return p.c.Close()
}

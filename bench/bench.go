package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/memory"

	quiver "github.com/quiver-ingest/quiver/clients/go"
)

const (
	targetQuiver   = "quiver"
	targetBaseline = "baseline"
)

// target is one server being measured.
type target struct {
	name     string
	c        *quiver.Client
	endpoint string
}

// Run generates the workload, starts what cfg asks for (in-process Quiver,
// baseline), measures every stream count on every target, interleaving the
// targets run by run so that both see the same machine, and stops
// everything it started before returning. Progress lines go to log.
func Run(ctx context.Context, cfg Config, log io.Writer) (_ Report, err error) {
	if err := cfg.validate(); err != nil {
		return Report{}, fmt.Errorf("bench: %w", err)
	}
	mem := memory.DefaultAllocator
	fmt.Fprintf(log, "bench: generating %d rows in %d-row batches\n", cfg.Rows, cfg.BatchRows)
	w, err := newWorkload(mem, cfg.Seed, cfg.Rows, cfg.BatchRows)
	if err != nil {
		return Report{}, err
	}
	defer w.release()

	var cleanups []func() error
	defer func() {
		for _, f := range slices.Backward(cleanups) {
			err = errors.Join(err, f())
		}
	}()
	conn, server := cfg.Conn, cfg.Conn.Addr
	if conn.Addr == "" {
		addr, stop, err := startDiscard(ctx, cfg.Endpoint)
		if err != nil {
			return Report{}, err
		}
		cleanups = append(cleanups, stop)
		conn.Addr, server = addr, "in-process"
	}
	qc, err := conn.Dial()
	if err != nil {
		return Report{}, err
	}
	cleanups = append(cleanups, qc.Close)
	targets := []target{{targetQuiver, qc, cfg.Endpoint}}
	if cfg.Baseline {
		addr, stop, err := startBaseline(mem, quiver.DefaultMaxMessageBytes)
		if err != nil {
			return Report{}, err
		}
		cleanups = append(cleanups, stop)
		bc, err := quiver.Dial(addr)
		if err != nil {
			return Report{}, err
		}
		cleanups = append(cleanups, bc.Close)
		targets = append(targets, target{targetBaseline, bc, cfg.Endpoint})
	}

	for _, t := range targets {
		if err := warmUp(ctx, t, w); err != nil {
			return Report{}, err
		}
	}
	rep := Report{
		Workload: WorkloadInfo{
			RowsPerStream: cfg.Rows, BatchRows: cfg.BatchRows, Batches: len(w.batches),
			BytesPerBatch: w.bytes / int64(len(w.batches)), Seed: cfg.Seed,
		},
		Server: server,
		Runs:   cfg.Runs,
	}
	for _, streams := range cfg.Streams {
		runs := make([][]Result, len(targets))
		for run := range cfg.Runs {
			for i, t := range targets {
				res, err := measure(ctx, t.name, t.c, t.endpoint, w, streams)
				if err != nil {
					return Report{}, err
				}
				fmt.Fprintf(log, "bench: %s, %d stream(s), run %d: %s rows/s\n", t.name, streams, run+1, humanRate(res.RowsPerSec))
				runs[i] = append(runs[i], res)
			}
		}
		for _, rs := range runs {
			rep.Results = append(rep.Results, MedianBy(rs, func(r Result) float64 { return r.RowsPerSec }))
		}
	}
	rep.Ratios = ratios(rep.Results)
	return rep, nil
}

// warmUp sends one batch so that connection setup and first-call costs
// stay out of the measurement.
func warmUp(ctx context.Context, t target, w *load) error {
	one := &load{schema: w.schema, batches: w.batches[:1], rows: w.batches[0].NumRows()}
	if _, err := measure(ctx, t.name, t.c, t.endpoint, one, 1); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

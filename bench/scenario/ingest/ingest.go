// Package ingest is the default scenario of quiverbench and `quiver
// bench`: the standard workload put through N concurrent DoPut streams
// (bench.Run) to a discard endpoint of Quiver in process, or to any
// running server with --addr, optionally against a bare arrow-go Flight
// server in the same run (--baseline).
package ingest

import (
	"context"
	"flag"
	"io"

	"github.com/quiver-ingest/quiver/bench"
	"github.com/quiver-ingest/quiver/bench/workload"
	"github.com/quiver-ingest/quiver/clients/go/quiverflag"
)

// Options are the scenario's flags.
type Options struct {
	cfg  bench.Config
	conn *quiverflag.Conn
	json bool
}

// Register adds the scenario's flags to fs.
func (o *Options) Register(fs *flag.FlagSet) {
	o.conn = quiverflag.Register(fs, "")
	fs.StringVar(&o.cfg.Endpoint, "endpoint", "devnull", "endpoint to put to (without --addr: the in-process discard endpoint's name)")
	o.cfg.Load.Register(fs, 2_000_000)
	fs.IntVar(&o.cfg.BatchRows, "batch-rows", workload.DefaultBatchRows, "rows per batch")
	fs.Uint64Var(&o.cfg.Seed, "seed", workload.DefaultSeed, "workload seed")
	fs.BoolVar(&o.cfg.Baseline, "baseline", false, "also measure a bare arrow-go Flight server and print the ratio")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
}

// Scenario is the ingest scenario for bench.Main.
func Scenario() bench.Scenario {
	return bench.NewScenario[Options]("ingest", "N DoPut streams of the standard workload to a discard endpoint (--addr: any server; --baseline: vs bare Flight)", run)
}

func run(ctx context.Context, o Options, stdout, stderr io.Writer) error {
	cfg := o.cfg
	cfg.Conn = *o.conn
	rep, err := bench.Run(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	if o.json {
		return rep.WriteJSON(stdout)
	}
	return rep.WriteTable(stdout)
}

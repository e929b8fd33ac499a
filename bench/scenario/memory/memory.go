// Package memory is the memory scenario of quiverbench: how much memory a
// Quiver server holds against its budget as concurrent streams grow. For
// each target (a discard, a Delta append and a Lance append endpoint) and
// each stream count it starts a fresh `quiver serve` process (the binary
// given by --quiver, with limits.memory_bytes = --budget), drives it with
// the standard workload from this process (bench.Run), and reads the
// server process's peak RSS (VmHWM, Linux) — the server alone, without its
// clients. The report gives rows/s and the peak against the bound
// 2 × budget + 256 MiB:
//
//	make build && go run ./bench/cmd/quiverbench --scenario memory --quiver bin/quiver --streams 1,4,16,64
package memory

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/quiver-ingest/quiver/bench"
)

// targets are the endpoints measured, by name: their config under
// endpoints ({dir}: the folder of the run).
var targets = map[string]string{
	"discard": "  - {name: discard, sink: discard}\n",
	"delta":   "  - name: delta\n    sink: delta\n    delta: {table_uri: \"file://{dir}/table\", parquet: {compression: zstd}}\n",
	"lance":   "  - name: lance\n    sink: lance\n    lance: {dataset_uri: \"file://{dir}/items.lance\"}\n",
}

// headroom is what the bound allows beyond twice the budget: the Go
// runtime, the binary and buffers the budget does not count.
const headroom = 256 << 20

// Options are the scenario's flags.
type Options struct {
	bench.Load
	quiver  string
	budget  int64
	targets string
	keep    bool
}

// Register adds --streams, --rows, --runs, --quiver, --budget, --targets
// and --keep to fs.
func (o *Options) Register(fs *flag.FlagSet) {
	o.Load.Register(fs, 250_000)
	o.Streams = []int{1, 4, 16, 64}
	fs.StringVar(&o.quiver, "quiver", "bin/quiver", "the quiver binary to serve (make build)")
	fs.Int64Var(&o.budget, "budget", 256<<20, "limits.memory_bytes of the server, bytes")
	fs.StringVar(&o.targets, "targets", "discard,delta,lance", "endpoints to measure, a comma list of discard, delta, lance")
	fs.BoolVar(&o.keep, "keep", false, "keep the servers' folders (tables, logs)")
}

// Scenario is the memory scenario for bench.Main.
func Scenario() bench.Scenario {
	return bench.NewScenario[Options]("memory", "a quiver serve process's peak RSS against its memory budget at 1 to 64 streams (discard, Delta, Lance)", run)
}

// row is one line of the report.
type row struct {
	target     string
	streams    int
	rowsPerSec float64
	peak       int64
}

func run(ctx context.Context, o Options, out, log io.Writer) (err error) {
	names, err := o.validate()
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	dir, remove, err := bench.TempDir("quiverbench-memory", "servers", o.keep, log)
	if err != nil {
		return err
	}
	defer remove()
	var rows []row
	for _, name := range names {
		for _, streams := range o.Streams {
			r, err := measure(ctx, o, filepath.Join(dir, fmt.Sprintf("%s-%d", name, streams)), name, streams, log)
			if err != nil {
				return fmt.Errorf("memory: %s, %d streams: %w", name, streams, err)
			}
			rows = append(rows, r)
		}
	}
	return report(out, o.budget, rows)
}

func (o Options) validate() ([]string, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.budget < 16<<20 {
		return nil, fmt.Errorf("--budget %d: at least 16 MiB", o.budget)
	}
	if _, err := os.Stat(o.quiver); err != nil {
		return nil, fmt.Errorf("--quiver: %w (build it with make build)", err)
	}
	var names []string
	for _, n := range strings.Split(o.targets, ",") {
		if _, ok := targets[n]; !ok {
			return nil, fmt.Errorf("--targets: unknown target %q (discard, delta, lance)", n)
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names, nil
}

// measure serves one target in a new process under dir and drives it
// with streams streams.
func measure(ctx context.Context, o Options, dir, target string, streams int, log io.Writer) (row, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return row{}, err
	}
	config := filepath.Join(dir, "quiver.yaml")
	yaml := fmt.Sprintf("listen: 127.0.0.1:0\nhttp_listen: 127.0.0.1:0\ndata_dir: %s\nlimits: {memory_bytes: %d}\nendpoints:\n",
		filepath.Join(dir, "data"), o.budget)
	yaml += strings.ReplaceAll(targets[target], "{dir}", dir)
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		return row{}, err
	}
	srv, err := bench.Serve(ctx, o.quiver, config, filepath.Join(dir, "quiver.log"))
	if err != nil {
		return row{}, err
	}
	rep, err := bench.Run(ctx, bench.NewConfig(srv.FlightAddr, target, bench.Load{Streams: []int{streams}, Rows: o.Rows, Runs: o.Runs}), log)
	if err = errors.Join(err, srv.Stop()); err != nil {
		return row{}, err
	}
	peak := srv.PeakRSS() // the server's whole life, its drain included
	fmt.Fprintf(log, "memory: %s, %d stream(s): server peak RSS %d MiB\n", target, streams, peak>>20)
	return row{target: target, streams: streams, rowsPerSec: rep.Results[0].RowsPerSec, peak: peak}, nil
}

func report(w io.Writer, budget int64, rows []row) error {
	bound := 2*budget + headroom
	tw := bench.NewTable(w)
	fmt.Fprintln(tw, "target\tstreams\trows/s\tserver peak RSS MiB\tpeak / budget\twithin 2×budget+256 MiB\t")
	for _, r := range rows {
		within := "yes"
		if r.peak < 0 {
			within = "unknown"
		} else if r.peak > bound {
			within = "NO"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%d\t%.2f\t%s\t\n", r.target, r.streams, r.rowsPerSec, r.peak>>20, float64(r.peak)/float64(budget), within)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "budget (limits.memory_bytes) %d MiB, bound %d MiB; peak RSS of the server process alone (its clients run in quiverbench)\n", budget>>20, bound>>20)
	return err
}

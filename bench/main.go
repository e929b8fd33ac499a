package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/quiver-ingest/quiver/clients/go/quiverflag"
)

// Config is one bench invocation; Main fills it from flags.
type Config struct {
	// Conn is the Quiver server to measure; an empty Conn.Addr starts one
	// in process with a discard endpoint named Endpoint.
	Conn     quiverflag.Conn
	Endpoint string
	// Streams lists the stream counts to measure, in order.
	Streams []int
	// Rows per stream, sent in batches of BatchRows.
	Rows      int64
	BatchRows int
	Seed      uint64
	// Runs per (target, stream count); the median by rows/s is reported.
	Runs int
	// Baseline also measures a bare arrow-go Flight server in process.
	Baseline bool
}

func (c Config) validate() error {
	if len(c.Streams) == 0 {
		return errors.New("--streams: give at least one stream count")
	}
	for _, n := range c.Streams {
		if n <= 0 {
			return fmt.Errorf("--streams: %d: stream counts must be positive", n)
		}
	}
	switch {
	case c.Rows <= 0:
		return fmt.Errorf("--rows %d: must be positive", c.Rows)
	case c.BatchRows <= 0:
		return fmt.Errorf("--batch-rows %d: must be positive", c.BatchRows)
	case c.Runs <= 0:
		return fmt.Errorf("--runs %d: must be positive", c.Runs)
	case c.Endpoint == "":
		return errors.New("--endpoint: must not be empty")
	}
	return nil
}

// Main is the command line of quiverbench and `quiver bench`: it parses
// args, runs the benchmark and writes the report (a table, or JSON with
// --json) to stdout; progress goes to stderr. -h prints the flags and
// returns flag.ErrHelp.
//
// --scenario picks the benchmark: ingest (the default, configured by the
// flags of Config) or one of scenarios, which bring their own flags.
// Setting a flag of another scenario is an error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, scenarios ...Scenario) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := Config{Streams: []int{1, 4}}
	conn := quiverflag.Register(fs, "")
	fs.StringVar(&cfg.Endpoint, "endpoint", "devnull", "endpoint to put to")
	fs.Var((*intList)(&cfg.Streams), "streams", "concurrent streams, a comma list runs each (e.g. 1,4)")
	fs.Int64Var(&cfg.Rows, "rows", 2_000_000, "rows per stream")
	fs.IntVar(&cfg.BatchRows, "batch-rows", DefaultBatchRows, "rows per batch")
	fs.Uint64Var(&cfg.Seed, "seed", DefaultSeed, "workload seed")
	fs.IntVar(&cfg.Runs, "runs", 3, "runs per target and stream count; the median is reported")
	fs.BoolVar(&cfg.Baseline, "baseline", false, "also measure a bare arrow-go Flight server and print the ratio")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	scenario := fs.String("scenario", IngestScenario, "benchmark to run: "+scenarioNames(scenarios))
	runScenario, owner := scenarioFlags(fs, scenarios)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: quiverbench [flags]   (also: quiver bench [flags])")
		fmt.Fprintln(stderr, "Without --addr, Quiver runs in process with a discard endpoint.")
		for _, sc := range scenarios {
			fmt.Fprintf(stderr, "--scenario %s: %s\n", sc.Name, sc.Summary)
		}
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected argument %q (all settings are flags)", fs.Arg(0))
	}
	if *scenario != IngestScenario && runScenario[*scenario] == nil {
		return fmt.Errorf("bench: --scenario %q: give one of %s", *scenario, scenarioNames(scenarios))
	}
	if err := checkScenarioFlags(fs, *scenario, owner); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if run := runScenario[*scenario]; run != nil {
		return run(ctx, stdout, stderr)
	}
	cfg.Conn = *conn
	rep, err := Run(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	if *asJSON {
		return rep.WriteJSON(stdout)
	}
	return rep.WriteTable(stdout)
}

// intList is a flag.Value of comma-separated positive ints.
type intList []int

func (l *intList) String() string {
	parts := make([]string, len(*l))
	for i, n := range *l {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func (l *intList) Set(s string) error {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return fmt.Errorf("%q is not a comma list of integers", s)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

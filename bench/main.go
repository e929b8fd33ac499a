package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/quiver-ingest/quiver/bench/workload"
	"github.com/quiver-ingest/quiver/clients/go/quiverflag"
)

// Load is what a load-driving scenario sends: Rows rows per stream at
// each stream count of Streams, Runs times (the median is reported).
type Load struct {
	Streams []int
	Rows    int64
	Runs    int
}

// Register adds --streams, --rows and --runs to fs, with rows rows per
// stream, streams 1 and 4 and 3 runs as defaults.
func (l *Load) Register(fs *flag.FlagSet, rows int64) {
	l.Streams = []int{1, 4}
	fs.Var((*intList)(&l.Streams), "streams", "concurrent streams, a comma list runs each (e.g. 1,4)")
	fs.Int64Var(&l.Rows, "rows", rows, "rows per stream")
	fs.IntVar(&l.Runs, "runs", 3, "runs per target and stream count; the median is reported")
}

// Validate checks that every count is positive.
func (l Load) Validate() error {
	if len(l.Streams) == 0 {
		return errors.New("--streams: give at least one stream count")
	}
	for _, n := range l.Streams {
		if n <= 0 {
			return fmt.Errorf("--streams: %d: stream counts must be positive", n)
		}
	}
	switch {
	case l.Rows <= 0:
		return fmt.Errorf("--rows %d: must be positive", l.Rows)
	case l.Runs <= 0:
		return fmt.Errorf("--runs %d: must be positive", l.Runs)
	}
	return nil
}

// Config is one run of the load driver (Run).
type Config struct {
	// Conn is the Quiver server to measure; an empty Conn.Addr starts one
	// in process (Start) with a discard endpoint named Endpoint.
	Conn     quiverflag.Conn
	Endpoint string
	Load
	// BatchRows per batch, Seed of the workload.
	BatchRows int
	Seed      uint64
	// Baseline also measures a bare arrow-go Flight server in process.
	Baseline bool
}

// NewConfig returns a Config of the standard workload (batch size and
// seed) putting load to endpoint at addr.
func NewConfig(addr, endpoint string, load Load) Config {
	return Config{Conn: quiverflag.Conn{Addr: addr}, Endpoint: endpoint, Load: load,
		BatchRows: workload.DefaultBatchRows, Seed: workload.DefaultSeed}
}

func (c Config) validate() error {
	if err := c.Load.Validate(); err != nil {
		return err
	}
	switch {
	case c.BatchRows <= 0:
		return fmt.Errorf("--batch-rows %d: must be positive", c.BatchRows)
	case c.Endpoint == "":
		return errors.New("--endpoint: must not be empty")
	}
	return nil
}

// Main is the command line of quiverbench and `quiver bench`: --scenario
// picks one of scenarios (the first is the default), whose own flags
// configure it; it runs it, the report going to stdout and progress to
// stderr, and with --record DIR also to a new file in DIR (record). -h
// prints the scenarios and the picked one's flags, and returns
// flag.ErrHelp.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, scenarios ...Scenario) error {
	if len(scenarios) == 0 {
		return errors.New("bench: no scenario")
	}
	sc := scenarios[0]
	if name := scenarioArg(args); name != "" {
		found := false
		for _, s := range scenarios {
			if s.Name == name {
				sc, found = s, true
			}
		}
		if !found {
			return fmt.Errorf("bench: --scenario %q: give one of %s", name, scenarioNames(scenarios))
		}
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.String("scenario", sc.Name, "benchmark to run: "+scenarioNames(scenarios))
	recordDir := fs.String("record", "", "also write the report, with the command line, build and machine load, to a new file in this folder (bench/results)")
	run := sc.Flags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: quiverbench [--scenario NAME] [flags]")
		for _, s := range scenarios {
			fmt.Fprintf(stderr, "  --scenario %s: %s\n", s.Name, s.Summary)
		}
		fmt.Fprintf(stderr, "flags of --scenario %s:\n", sc.Name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected argument %q (all settings are flags)", fs.Arg(0))
	}
	if *recordDir == "" {
		return run(ctx, stdout, stderr)
	}
	rec := newRecord(*recordDir, sc.Name, fs)
	if err := run(ctx, rec.tee(stdout), stderr); err != nil {
		return err
	}
	path, err := rec.write()
	if err == nil {
		fmt.Fprintf(stderr, "bench: recorded in %s\n", path)
	}
	return err
}

// IntsVar defines a flag of comma-separated ints (like --streams) in p.
func IntsVar(fs *flag.FlagSet, p *[]int, name, usage string) { fs.Var((*intList)(p), name, usage) }

// intList is a flag.Value of comma-separated ints.
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

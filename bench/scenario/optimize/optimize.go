// Package optimize is the optimize scenario of quiverbench: Quiver's
// optimize action on a Delta table of many small files and on a Lance
// dataset of many small fragments, against delta-rs
// `optimize.compact()`, Spark `OPTIMIZE` (local[2]) and pylance
// `compact_files()` on identical copies, in the same run. The references
// are Python libraries, so the scenario runs the project's script
// (bench/optimize_vs_reference.py) with the project's .venv (make venv)
// against a quiver binary (make build); docs/benchmarks.md says what it
// measures:
//
//	make build venv && go run ./bench/cmd/quiverbench --scenario optimize --quiver bin/quiver --no-spark
package optimize

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"

	"github.com/quiver-ingest/quiver/bench"
)

// Options are the scenario's flags.
type Options struct {
	quiver, python, script string
	runs                   int
	only                   string
	noSpark                bool
	files, rowsPerFile     int
	lanceFragments         int
	lanceRows              int
}

// Register adds the scenario's flags to fs.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.quiver, "quiver", "bin/quiver", "the quiver binary to serve (make build)")
	fs.StringVar(&o.python, "python", ".venv/bin/python", "the Python of the project's .venv (make venv), with deltalake, pyspark, delta-spark and pylance")
	fs.StringVar(&o.script, "script", "bench/optimize_vs_reference.py", "the reference script")
	fs.IntVar(&o.runs, "runs", 3, "runs per engine; the median is reported")
	fs.StringVar(&o.only, "only", "", "delta or lance alone (default both)")
	fs.BoolVar(&o.noSpark, "no-spark", false, "skip Spark")
	fs.IntVar(&o.files, "files", 1000, "Delta: small files in the table")
	fs.IntVar(&o.rowsPerFile, "rows-per-file", 2000, "Delta: rows per small file")
	fs.IntVar(&o.lanceFragments, "lance-fragments", 200, "Lance: fragments in the dataset")
	fs.IntVar(&o.lanceRows, "lance-rows", 10_000, "Lance: rows per fragment")
}

// Scenario is the optimize scenario for bench.Main.
func Scenario() bench.Scenario {
	return bench.NewScenario[Options]("optimize", "Delta and Lance optimize vs delta-rs, Spark and pylance compaction (needs .venv)", run)
}

// args returns the script's command line, or why the options are wrong.
func (o Options) args() ([]string, error) {
	switch {
	case o.runs <= 0:
		return nil, fmt.Errorf("--runs %d: must be positive", o.runs)
	case o.only != "" && o.only != "delta" && o.only != "lance":
		return nil, fmt.Errorf("--only %q: delta or lance", o.only)
	case o.files <= 0 || o.rowsPerFile <= 0 || o.lanceFragments <= 0 || o.lanceRows <= 0:
		return nil, errors.New("--files, --rows-per-file, --lance-fragments and --lance-rows must be positive")
	}
	for flag, path := range map[string]string{"--quiver": o.quiver, "--python": o.python, "--script": o.script} {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("%s: %w (run from the repository root after make build venv)", flag, err)
		}
	}
	args := []string{o.script, "--quiver", o.quiver, "--runs", strconv.Itoa(o.runs),
		"--files", strconv.Itoa(o.files), "--rows-per-file", strconv.Itoa(o.rowsPerFile),
		"--lance-fragments", strconv.Itoa(o.lanceFragments), "--lance-rows", strconv.Itoa(o.lanceRows)}
	if o.only != "" {
		args = append(args, "--only", o.only)
	}
	if o.noSpark {
		args = append(args, "--no-spark")
	}
	return args, nil
}

func run(ctx context.Context, o Options, out, log io.Writer) error {
	args, err := o.args()
	if err != nil {
		return fmt.Errorf("optimize: %w", err)
	}
	cmd := exec.CommandContext(ctx, o.python, args...)
	cmd.Stdout, cmd.Stderr = out, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("optimize: %s %s: %w", o.python, o.script, err)
	}
	return nil
}

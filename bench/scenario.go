package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// IngestScenario is the name of Main's own scenario: the standard
// workload put through N streams (the flags of Config).
const IngestScenario = "ingest"

// Scenario is a benchmark that Main runs instead of its ingestion
// benchmark when --scenario names it. Scenarios that need more than this
// package may import (a sink, the whole server: package bench must not
// import them, see bench/benchkit) are passed to Main by the command.
type Scenario struct {
	// Name is the value of --scenario; Summary is its line in -h.
	Name, Summary string
	// Flags registers the scenario's own flags on fs (their names must
	// not clash with Main's) and returns the function that runs it once
	// they are parsed: it writes its report to stdout and progress to
	// stderr.
	Flags func(fs *flag.FlagSet) func(ctx context.Context, stdout, stderr io.Writer) error
}

// scenarioFlags registers every scenario's flags on fs, and returns the
// runner of each and which flags belong to which scenario.
func scenarioFlags(fs *flag.FlagSet, scenarios []Scenario) (map[string]func(context.Context, io.Writer, io.Writer) error, map[string]string) {
	runs := map[string]func(context.Context, io.Writer, io.Writer) error{}
	owner := map[string]string{}
	for _, sc := range scenarios {
		before := flagNames(fs)
		runs[sc.Name] = sc.Flags(fs)
		for _, name := range flagNames(fs) {
			if !slices.Contains(before, name) {
				owner[name] = sc.Name
			}
		}
	}
	return runs, owner
}

// checkScenarioFlags returns an error naming the first flag set on the
// command line that belongs to another scenario than scenario (owner maps
// scenario flags to their scenario; the others are the ingest scenario's,
// except the shared ones).
func checkScenarioFlags(fs *flag.FlagSet, scenario string, owner map[string]string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err != nil || f.Name == "scenario" {
			return
		}
		of, ok := owner[f.Name]
		if !ok {
			of = IngestScenario
		}
		if of != scenario {
			err = fmt.Errorf("--%s is a flag of --scenario %s, not of %s", f.Name, of, scenario)
		}
	})
	return err
}

func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// scenarioNames lists Main's scenario names for -h and errors.
func scenarioNames(scenarios []Scenario) string {
	names := []string{IngestScenario}
	for _, sc := range scenarios {
		names = append(names, sc.Name)
	}
	return strings.Join(names, ", ")
}

// NewScenario returns the Scenario name that registers the flags of an
// options value O (through *O's Register) and runs run with it.
func NewScenario[O any, PO interface {
	*O
	Register(fs *flag.FlagSet)
}](name, summary string, run func(ctx context.Context, o O, stdout, stderr io.Writer) error) Scenario {
	return Scenario{
		Name:    name,
		Summary: summary,
		Flags: func(fs *flag.FlagSet) func(context.Context, io.Writer, io.Writer) error {
			var o O
			PO(&o).Register(fs)
			return func(ctx context.Context, stdout, stderr io.Writer) error { return run(ctx, o, stdout, stderr) }
		},
	}
}

package bench

import (
	"context"
	"flag"
	"io"
	"strings"
)

// Scenario is one benchmark that Main runs when --scenario names it; each
// lives in its own package under bench/scenario.
type Scenario struct {
	// Name is the value of --scenario; Summary is its line in -h.
	Name, Summary string
	// Flags registers the scenario's own flags on fs and returns the
	// function that runs it once they are parsed: it writes its report to
	// stdout and progress to stderr.
	Flags func(fs *flag.FlagSet) func(ctx context.Context, stdout, stderr io.Writer) error
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

// scenarioArg returns the value of --scenario (or -scenario) in args, ""
// when it is not given, before any flag is parsed (the scenario decides
// which flags exist). It looks at every argument up to "--": flag values
// are not told apart, so a value spelled "--scenario" would be mistaken.
func scenarioArg(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return ""
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if v, ok := strings.CutPrefix(name, "scenario="); ok {
			return v
		}
		if name == "scenario" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// scenarioNames lists the scenarios' names for -h and errors.
func scenarioNames(scenarios []Scenario) string {
	names := make([]string, len(scenarios))
	for i, sc := range scenarios {
		names[i] = sc.Name
	}
	return strings.Join(names, ", ")
}

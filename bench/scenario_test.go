package bench

import (
	"context"
	"flag"
	"io"
	"strings"
	"testing"
)

// probeOptions are the options of the test scenario: --size.
type probeOptions struct{ size string }

func (o *probeOptions) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.size, "size", "3", "a scenario flag")
}

// TestMainScenarios checks that --scenario runs the named scenario with
// its own flags and that flags of another scenario are refused.
func TestMainScenarios(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantRan string // the scenario's --size when it ran
		wantErr string
	}{
		{"scenario with its flag", []string{"--scenario", "probe", "--size", "7"}, "7", ""},
		{"scenario with its default", []string{"--scenario=probe"}, "3", ""},
		{"unknown scenario", []string{"--scenario", "nope"}, "", `"nope": give one of ingest, probe`},
		{"ingest flag with a scenario", []string{"--scenario", "probe", "--streams", "2"}, "", "--streams is a flag of --scenario ingest, not of probe"},
		{"scenario flag without it", []string{"--size", "2", "--rows", "1"}, "", "--size is a flag of --scenario probe, not of ingest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := ""
			probe := NewScenario[probeOptions]("probe", "test scenario", func(_ context.Context, o probeOptions, _, _ io.Writer) error {
				ran = o.size
				return nil
			})
			err := Main(t.Context(), tt.args, io.Discard, io.Discard, probe)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Main: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Main error %v, want one containing %q", err, tt.wantErr)
			}
			if ran != tt.wantRan {
				t.Errorf("scenario ran with --size %q, want %q", ran, tt.wantRan)
			}
		})
	}
}

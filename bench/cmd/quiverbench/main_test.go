package main

import (
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/quiver-ingest/quiver/bench"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// sarama's go-metrics meters share one process-wide ticker that is
		// never stopped.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		// sarama's per-broker circuit breaker sleeps out its timeout after
		// the producer closed.
		goleak.IgnoreAnyFunction("github.com/eapache/go-resiliency/breaker.(*Breaker).timer"),
		// OpenCensus's stats worker, started at init by the GCS client
		// that the scale-out scenario's emulator package links.
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}

// TestSinkScenarios runs the sink scenarios that need no reference tool at
// a small size through the command's scenario list, and checks that every
// target's line carries a rate (the upsert and merge-insert scenarios have
// tests of their own).
func TestSinkScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("benchmark runs: skipped with -short")
	}
	tests := []struct {
		args    []string
		targets []string
		rateAt  int // the rate's field, counted from the target's
	}{
		{[]string{"--scenario", "delta-append", "--streams", "1", "--rows", "3000", "--runs", "1"},
			[]string{"devnull", "zstd", "snappy", "raw-zstd", "raw-snappy"}, 2},
		{[]string{"--scenario", "kafka", "--streams", "1", "--rows", "2000", "--runs", "1"},
			[]string{"quiver", "sarama", "franz-go"}, 1},
		{[]string{"--scenario", "lance-append", "--streams", "1", "--rows", "3000", "--runs", "1", "--no-lancedb"},
			[]string{"quiver-lance"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.args[1], func(t *testing.T) {
			var out strings.Builder
			if err := bench.Main(t.Context(), tt.args, &out, testLog{t}, scenarios()...); err != nil {
				t.Fatal(err)
			}
			for _, target := range tt.targets {
				if !hasRate(out.String(), target, tt.rateAt) {
					t.Errorf("report has no rate for %s:\n%s", target, out.String())
				}
			}
		})
	}
}

// hasRate reports whether a line of report names target and carries a
// positive number `at` fields after it.
func hasRate(report, target string, at int) bool {
	for _, l := range strings.Split(report, "\n") {
		f := strings.Fields(l)
		for i := 0; i+at < len(f); i++ {
			if rate, err := strconv.ParseFloat(f[i+at], 64); f[i] == target && err == nil && rate > 0 {
				return true
			}
		}
	}
	return false
}

// testLog sends progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

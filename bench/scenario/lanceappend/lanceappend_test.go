package lanceappend

import (
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/quiver-ingest/quiver/bench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSmall runs the scenario at a small size through bench.Main and
// checks that every target has a line with a rate.
func TestSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("a benchmark run: skipped with -short")
	}
	var out strings.Builder
	if err := bench.Main(t.Context(), []string{"--scenario", "lance-append", "--streams", "1", "--rows", "3000", "--runs", "1", "--no-lancedb"}, &out, testLog{t}, Scenario()); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"quiver-lance"} {
		if !hasRate(out.String(), target) {
			t.Errorf("report has no rate for %s:\n%s", target, out.String())
		}
	}
}

// hasRate reports whether a line of report names target and carries a
// positive rate 2 field(s) after it.
func hasRate(report, target string) bool {
	for _, l := range strings.Split(report, "\n") {
		f := strings.Fields(l)
		for i := 0; i+2 < len(f); i++ {
			if rate, err := strconv.ParseFloat(f[i+2], 64); f[i] == target && err == nil && rate > 0 {
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

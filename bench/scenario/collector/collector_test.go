package collector

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/quiver-ingest/quiver/bench"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// TestScenario runs the scenario small on local disk (about 3 s) and
// checks that both kinds of put have their line; the run itself checks
// that each table holds exactly the rows the clients were answered
// durable.
func TestScenario(t *testing.T) {
	var out bytes.Buffer
	args := []string{"--streams", "4", "--batch-rows", "100", "--every", "50ms", "--duration", "1s", "--commit-interval", "200ms"}
	if err := bench.Main(context.Background(), args, &out, io.Discard, Scenario()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || !strings.HasPrefix(strings.TrimSpace(lines[2]), "stream ") || !strings.HasPrefix(strings.TrimSpace(lines[3]), "auto ") {
		t.Fatalf("report:\n%s", out.String())
	}
}

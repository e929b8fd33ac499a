package scaleout

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/quiver-ingest/quiver/bench"
	"github.com/quiver-ingest/quiver/internal/emulator"
	"github.com/quiver-ingest/quiver/internal/reftool"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// TestScenario runs the scenario small, 1 and 2 servers, and checks that
// each server count has its line (the run itself checks that no commit
// was lost).
func TestScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("a benchmark run: skipped with -short")
	}
	var out bytes.Buffer
	args := []string{"--servers", "1,2", "--clients", "3", "--commits", "6", "--rows", "10", "--runs", "1"}
	err := bench.Main(context.Background(), args, &out, io.Discard, Scenario())
	if errors.Is(err, emulator.ErrMissing) {
		reftool.Missing(t, "moto (in the project .venv: make venv)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(strings.TrimSpace(lines[2]), "1 ") || !strings.HasSuffix(lines[2], "1.00x") ||
		!strings.HasPrefix(strings.TrimSpace(lines[3]), "2 ") {
		t.Fatalf("report:\n%s", out.String())
	}
}

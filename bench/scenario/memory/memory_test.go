package memory

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/quiver-ingest/quiver/bench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunSmall serves each target in its own quiver process and checks
// that the report gives every target and stream count a rate and the
// server's own peak RSS, within the bound.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the quiver binary and runs a benchmark: skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "quiver")
	build := exec.Command("go", "build", "-o", bin, "github.com/quiver-ingest/quiver/server/cmd/quiver")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build quiver: %v\n%s", err, out)
	}
	o := Options{Load: bench.Load{Streams: []int{1, 3}, Rows: 20_000, Runs: 1}, quiver: bin, budget: 64 << 20, targets: "discard,delta,lance"}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		if len(f) != 6 || (f[0] != "discard" && f[0] != "delta" && f[0] != "lance") {
			continue
		}
		seen++
		// target streams rows/s peakMiB peak/budget within
		if f[2] == "0" || f[3] == "0" || f[5] != "yes" {
			t.Errorf("line %q: want a rate, a peak RSS and yes", l)
		}
	}
	if seen != 6 {
		t.Errorf("%d report lines for 3 targets × 2 stream counts, want 6:\n%s", seen, out.String())
	}
}

func TestOptionsRefused(t *testing.T) {
	// /bin/false exists and serves nothing: were a check missing, the run
	// would fail on the server instead, with an error naming no flag.
	ok := Options{Load: bench.Load{Streams: []int{1}, Rows: 10, Runs: 1}, quiver: "/bin/false", budget: 64 << 20, targets: "discard"}
	for want, change := range map[string]func(*Options){
		"--quiver":  func(o *Options) { o.quiver = filepath.Join(t.TempDir(), "none") },
		"--budget":  func(o *Options) { o.budget = 1 << 20 },
		"--targets": func(o *Options) { o.targets = "discard,kafka" },
		"--streams": func(o *Options) { o.Streams = nil },
	} {
		o := ok
		change(&o)
		if err := run(context.Background(), o, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming %s", want, err, want)
		}
	}
}

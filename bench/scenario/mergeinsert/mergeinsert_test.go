package mergeinsert

import (
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/quiver-ingest/quiver/internal/lanceprobe/probetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunSmall runs the whole scenario at a small size and checks the
// report has every target and phase with a rate.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("a benchmark run: skipped with -short")
	}
	probetest.Dir(t)
	var out strings.Builder
	if err := Run(t.Context(), Options{BaseRows: 2000, SourceRows: 200, WarmMerges: 2}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"quiver first", "quiver later (median of 2)", "lancedb first", "lancedb later (median of 2)",
		"lancedb-btree first", "lancedb-btree later (median of 2)"}
	if len(lines) != 2+len(want) {
		t.Fatalf("report has %d lines, want %d:\n%s", len(lines), 2+len(want), out.String())
	}
	for i, w := range want {
		f := strings.Fields(lines[2+i])
		label := strings.Join(f[:len(strings.Fields(w))], " ")
		if label != w || len(f) < len(strings.Fields(w))+1 || f[len(strings.Fields(w))] == "0" {
			t.Errorf("line %q: want %q with a rate", lines[2+i], w)
		}
	}
	if !strings.Contains(lines[2], "x") {
		t.Errorf("quiver's line %q has no ratio to LanceDB", lines[2])
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{BaseRows: 0, SourceRows: 10}, {BaseRows: 10, SourceRows: 1}, {BaseRows: 10, SourceRows: 10, WarmMerges: -1}} {
		if err := Run(t.Context(), o, io.Discard, io.Discard); err == nil {
			t.Errorf("Run accepted %+v", o)
		}
	}
}

// TestLanceDBRates measures LanceDB alone at a small size: both rates are
// positive, and bad sizes are refused before node runs.
func TestLanceDBRates(t *testing.T) {
	if testing.Short() {
		t.Skip("a benchmark run: skipped with -short")
	}
	if _, _, err := LanceDBRates(0, 200, io.Discard); err == nil {
		t.Error("LanceDBRates accepted an empty table")
	}
	probetest.Dir(t)
	plain, indexed, err := LanceDBRates(2000, 200, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if plain <= 0 || indexed <= 0 {
		t.Fatalf("rates %v (no index) and %v (BTREE): want both positive", plain, indexed)
	}
}

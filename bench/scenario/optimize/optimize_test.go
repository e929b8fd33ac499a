package optimize

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiver-ingest/quiver/internal/reftool"
)

// root is the repository root (tests run in the package's folder).
const root = "../../.."

// TestRunSmall runs the reference script small, both formats, without
// Spark: it fails unless every engine's result reads back equal to the
// original (the script checks), and the report names both comparisons.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the quiver binary and runs a benchmark: skipped with -short")
	}
	python := filepath.Join(root, ".venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		reftool.Missing(t, "the project's .venv (make venv)", err)
	}
	bin := filepath.Join(t.TempDir(), "quiver")
	build := exec.Command("go", "build", "-o", bin, "github.com/quiver-ingest/quiver/server/cmd/quiver")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build quiver: %v\n%s", err, out)
	}
	o := Options{quiver: bin, python: python, script: filepath.Join(root, "bench", "optimize_vs_reference.py"), runs: 1, noSpark: true,
		files: 20, rowsPerFile: 200, lanceFragments: 10, lanceRows: 500}
	var out, log bytes.Buffer
	if err := run(context.Background(), o, &out, &log); err != nil {
		t.Fatalf("%v\n%s\n%s", err, out.String(), log.String())
	}
	for _, want := range []string{"Delta: optimize 20 files", "Lance: optimize 10 fragments", "deltars", "pylance"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestOptionsRefused: every wrong flag is named before anything runs.
func TestOptionsRefused(t *testing.T) {
	dir := t.TempDir()
	exists := filepath.Join(dir, "x")
	if err := os.WriteFile(exists, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ok := Options{quiver: exists, python: exists, script: exists, runs: 1, files: 1, rowsPerFile: 1, lanceFragments: 1, lanceRows: 1}
	if _, err := ok.args(); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	for want, change := range map[string]func(*Options){
		"--runs":   func(o *Options) { o.runs = 0 },
		"--only":   func(o *Options) { o.only = "kafka" },
		"--files":  func(o *Options) { o.files = -1 },
		"--quiver": func(o *Options) { o.quiver = filepath.Join(dir, "none") },
		"--python": func(o *Options) { o.python = filepath.Join(dir, "none") },
		"--script": func(o *Options) { o.script = filepath.Join(dir, "none") },
	} {
		o := ok
		change(&o)
		err := run(context.Background(), o, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming it", want, err)
		}
	}
}

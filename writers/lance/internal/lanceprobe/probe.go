// Package lanceprobe runs the LanceDB probe (tools/lance-probe/probe.mjs
// of the Quiver workspace, @lancedb/lancedb 0.31.0 = lance 8.0.0) from Go
// tests, to prove that real Lance reads what Quiver writes and the other
// way round.
//
// The probe folder is copied to a cache directory outside the repository
// ($GOCACHE/../quiver-lance-probe) and installed there once with
// `npm run setup:<platform>`; tests skip only when node or npm is missing.
// Set QUIVER_LANCE_PROBE_SRC to use another probe folder.
package lanceprobe

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// defaultSource returns where the shared workspace keeps the probe: the
// folder shared/ beside the module root (as in development and CI).
func defaultSource() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	return filepath.Join(root, "..", "shared", "tools", "lance-probe"), nil
}

var (
	setupOnce sync.Once
	setupDir  string
	setupErr  string
)

// Dir returns the installed probe directory, installing it on first use.
// It skips the test when node or npm are missing and fails it when the
// install fails.
func Dir(t testing.TB) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("lanceprobe: %s is not installed; the LanceDB compatibility checks need Node >= 20 and npm", tool)
		}
	}
	setupOnce.Do(install)
	if setupErr != "" {
		t.Fatalf("lanceprobe: %s", setupErr)
	}
	return setupDir
}

func install() {
	src := os.Getenv("QUIVER_LANCE_PROBE_SRC")
	if src == "" {
		var err error
		if src, err = defaultSource(); err != nil {
			setupErr = "go env GOMOD: " + err.Error()
			return
		}
	}
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		setupErr = "go env GOCACHE: " + err.Error()
		return
	}
	dir := filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "quiver-lance-probe")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		setupErr = err.Error()
		return
	}
	for _, f := range []string{"package.json", "probe.mjs"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			setupErr = "read probe source (set QUIVER_LANCE_PROBE_SRC): " + err.Error()
			return
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			setupErr = err.Error()
			return
		}
	}
	setupDir = dir
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@lancedb", "lancedb")); err == nil {
		if matches, _ := filepath.Glob(filepath.Join(dir, "node_modules", "@lancedb", "lancedb-*")); len(matches) > 0 {
			return
		}
	}
	platform := map[string]string{"linux/amd64": "linux-x64", "linux/arm64": "linux-arm64", "darwin/arm64": "darwin-arm64"}[runtime.GOOS+"/"+runtime.GOARCH]
	if platform == "" {
		setupErr = "no probe setup script for " + runtime.GOOS + "/" + runtime.GOARCH
		return
	}
	cmd := exec.Command("npm", "run", "setup:"+platform)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		setupErr = "npm run setup:" + platform + ": " + err.Error() + "\n" + string(out)
	}
}

// Run runs `node probe.mjs args...` and returns its output; a non-zero
// exit fails the test with the output.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	dir := Dir(t)
	cmd := exec.Command("node", append([]string{"probe.mjs"}, args...)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("node probe.mjs %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

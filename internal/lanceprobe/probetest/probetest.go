// Package probetest installs the LanceDB probe (package lanceprobe) for
// tests and runs it from them. It is test support only: it imports
// testing and runs npm, and no command links it (`make lance-probe`
// installs the probe through its TestInstall).
package probetest

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/quiver-ingest/quiver/internal/lanceprobe"
	"github.com/quiver-ingest/quiver/internal/npmdir"
	"github.com/quiver-ingest/quiver/internal/reftool"
)

var (
	setupOnce sync.Once
	setupDir  string
	setupErr  string
)

// Dir returns the installed probe folder, installing it on first use
// (once per process; safe for concurrent use). When node or npm are
// missing it skips the test, or fails it with CI=true (reftool.Missing);
// it fails it when the install fails.
func Dir(t testing.TB) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			reftool.Missing(t, "node/npm", lanceprobe.ErrNoNode)
		}
	}
	setupOnce.Do(func() {
		var err error
		if setupDir, err = install(); err != nil {
			setupErr = err.Error()
		}
	})
	if setupErr != "" {
		t.Fatal("probetest: " + setupErr)
	}
	return setupDir
}

// Run runs `node probe.mjs args...` and returns its output; a non-zero
// exit fails the test with the output.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	dir := Dir(t)
	out, err := lanceprobe.Node(dir, lanceprobe.Script, args...)
	if err != nil {
		t.Fatalf("node %s %s: %v\n%s", lanceprobe.Script, strings.Join(args, " "), err, out)
	}
	return out
}

// nativePackages names @lancedb/lancedb's native module per platform.
var nativePackages = map[string]string{
	"linux/amd64":  "@lancedb/lancedb-linux-x64-gnu",
	"linux/arm64":  "@lancedb/lancedb-linux-arm64-gnu",
	"darwin/arm64": "@lancedb/lancedb-darwin-arm64",
}

func install() (string, error) {
	lockfile, err := lanceprobe.Files.ReadFile("probe/package-lock.json")
	if err != nil {
		return "", err
	}
	native := nativePackages[runtime.GOOS+"/"+runtime.GOARCH]
	if native == "" {
		return "", fmt.Errorf("no LanceDB native module for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	// The native module is an optional dependency of @lancedb/lancedb, like
	// the embedding packages that must not be installed (their install
	// scripts download binaries): install it alone, at the locked version.
	var lock struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	if err := json.Unmarshal(lockfile, &lock); err != nil {
		return "", fmt.Errorf("probe/package-lock.json: %w", err)
	}
	version := lock.Packages["node_modules/"+native].Version
	if version == "" {
		return "", fmt.Errorf("probe/package-lock.json does not lock %s", native)
	}
	files, err := fs.Sub(lanceprobe.Files, "probe")
	if err != nil {
		return "", err
	}
	return npmdir.Install(npmdir.Spec{
		Name:  lanceprobe.CacheName,
		Files: files,
		Extra: [][]string{{"install", "--no-save", "--no-package-lock", native + "@" + version}},
	})
}

// Package lanceprobe runs Quiver's LanceDB probe (probe/probe.mjs, on
// @lancedb/lancedb 0.31.0 = lance 8.0.0, pinned by probe/package.json and
// probe/package-lock.json) from Go tests, to prove that real Lance reads
// what Quiver writes and the other way round.
//
// The probe files are embedded in this package. On first use they are
// installed with internal/npmdir into a cache folder outside the
// repository, $GOCACHE/../quiver-lance-probe/<hash of the lockfile>; tests
// skip only when node or npm is missing.
package lanceprobe

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/quiver-ingest/quiver/internal/npmdir"
	"github.com/quiver-ingest/quiver/internal/reftool"
)

//go:embed probe/package.json probe/package-lock.json probe/probe.mjs
var probeFiles embed.FS

// Script is the probe's file name in the installed folder.
const Script = "probe.mjs"

var (
	setupOnce sync.Once
	setupDir  string
	setupErr  string
)

// ErrNoNode reports that node or npm is not installed.
var ErrNoNode = errors.New("lanceprobe: the LanceDB checks need Node >= 20 and npm, which are not installed")

// Install returns the installed probe directory, installing it on first
// use (once per process; safe for concurrent use). It returns ErrNoNode
// when node or npm are missing.
func Install() (string, error) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", ErrNoNode
		}
	}
	setupOnce.Do(func() {
		var err error
		if setupDir, err = install(); err != nil {
			setupErr = err.Error()
		}
	})
	if setupErr != "" {
		return "", errors.New("lanceprobe: " + setupErr)
	}
	return setupDir, nil
}

// Dir returns the installed probe directory, installing it on first use.
// When node or npm are missing it skips the test, or fails it with CI=true
// (reftool.Missing); it fails it when the install fails.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := Install()
	if errors.Is(err, ErrNoNode) {
		reftool.Missing(t, "node/npm", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// nativePackages names @lancedb/lancedb's native module per platform.
var nativePackages = map[string]string{
	"linux/amd64":  "@lancedb/lancedb-linux-x64-gnu",
	"linux/arm64":  "@lancedb/lancedb-linux-arm64-gnu",
	"darwin/arm64": "@lancedb/lancedb-darwin-arm64",
}

func install() (string, error) {
	lockfile, err := probeFiles.ReadFile("probe/package-lock.json")
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
	files, err := fs.Sub(probeFiles, "probe")
	if err != nil {
		return "", err
	}
	return npmdir.Install(npmdir.Spec{
		Name:  "quiver-lance-probe",
		Files: files,
		Extra: [][]string{{"install", "--no-save", "--no-package-lock", native + "@" + version}},
	})
}

// Run runs `node probe.mjs args...` and returns its output; a non-zero
// exit fails the test with the output.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	dir := Dir(t)
	out, err := Node(dir, Script, args...)
	if err != nil {
		t.Fatalf("node %s %s: %v\n%s", Script, strings.Join(args, " "), err, out)
	}
	return out
}

// Node runs `node script args...` in the installed probe folder dir and
// returns its combined output.
func Node(dir, script string, args ...string) (string, error) {
	cmd := exec.Command("node", append([]string{script}, args...)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// WriteIPC writes recs (borrowed, of schema) to the Arrow IPC file path,
// the input format of the probe's create-ipc and merge-insert.
func WriteIPC(path string, schema *arrow.Schema, recs []arrow.RecordBatch) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(schema))
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}

// NodeJSON runs `node script args...` like Node and decodes the last line
// of its output, the JSON answer of the probe's timed commands,
// into v.
func NodeJSON(dir, script string, v any, args ...string) error {
	out, err := Node(dir, script, args...)
	if err != nil {
		return fmt.Errorf("node %s %s: %w\n%s", script, strings.Join(args, " "), err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), v); err != nil {
		return fmt.Errorf("node %s %s answered %q: %w", script, strings.Join(args, " "), out, err)
	}
	return nil
}

// Package lanceprobe runs Quiver's LanceDB probe (probe/probe.mjs, on
// @lancedb/lancedb 0.31.0 = lance 8.0.0, pinned by probe/package.json and
// probe/package-lock.json), which proves that real Lance reads what
// Quiver writes and the other way round, and is the LanceDB side of the
// Lance benchmarks.
//
// The probe files are embedded in this package. They are installed (with
// internal/npmdir) into a cache folder outside the repository,
// <user cache dir>/quiver-lance-probe/<hash of the lockfile>, by the test
// helper package lanceprobe/probetest, on a test's first use or by
// `make lance-probe`. This package only finds that folder and runs node
// in it: it never installs anything, so the benchmark commands that use it
// run no package manager.
package lanceprobe

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/quiver-ingest/quiver/internal/npmdir"
)

// Files are the probe's files, under probe/.
//
//go:embed probe/package.json probe/package-lock.json probe/probe.mjs
var Files embed.FS

// Script is the probe's file name in the installed folder.
const Script = "probe.mjs"

// CacheName is the name of the probe's cache folder (npmdir.Spec.Name).
const CacheName = "quiver-lance-probe"

// ErrNoNode reports that node or npm is not installed.
var ErrNoNode = errors.New("lanceprobe: the LanceDB checks need Node >= 20 and npm, which are not installed")

// ErrNotInstalled reports that the probe's packages are not installed.
var ErrNotInstalled = errors.New("lanceprobe: the LanceDB probe is not installed: run `make lance-probe` (needs Node >= 20 and npm)")

// Folder returns the folder the probe is (or is to be) installed in: one
// per lockfile, so that a changed lockfile installs afresh.
func Folder() (string, error) {
	lockfile, err := Files.ReadFile("probe/package-lock.json")
	if err != nil {
		return "", err
	}
	return npmdir.Folder(CacheName, lockfile)
}

// Dir returns the installed probe folder: ErrNoNode when node is missing,
// ErrNotInstalled when the probe has not been installed, or when the
// installed script differs from this package's (a stale install).
func Dir() (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", ErrNoNode
	}
	dir, err := Folder()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, npmdir.Installed)); err != nil {
		return "", ErrNotInstalled
	}
	want, err := Files.ReadFile("probe/" + Script)
	if err != nil {
		return "", err
	}
	if got, err := os.ReadFile(filepath.Join(dir, Script)); err != nil || !bytes.Equal(got, want) {
		return "", ErrNotInstalled
	}
	return dir, nil
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

// NodeJSON runs `node script args...` like Node and decodes the last line
// of its output, the JSON answer of the probe's timed commands, into v.
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

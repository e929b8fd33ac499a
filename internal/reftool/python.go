package reftool

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Python returns the Python of the project's .venv (make venv) once it
// imports every module of modules; otherwise it ends t as Missing does,
// naming what is missing.
func Python(t testing.TB, modules ...string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		Missing(t, "the project's .venv", err)
	}
	python := filepath.Join(root, ".venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		Missing(t, "the project's .venv (make venv)", err)
	}
	if len(modules) > 0 {
		if out, err := exec.Command(python, "-c", "import "+strings.Join(modules, ", ")).CombinedOutput(); err != nil {
			Missing(t, strings.Join(modules, ", ")+" in the project's .venv (make venv)", errors.New(strings.TrimSpace(string(out))))
		}
	}
	return python
}

// RepoRoot returns the folder holding go.mod, above the working directory
// (a test's is its package's folder).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

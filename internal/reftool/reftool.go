// Package reftool is the one rule for tests that check Quiver against a
// reference tool installed outside Go (node and npm for LanceDB, kcat for
// librdkafka, root for a tmpfs, ...): when the tool is missing the test is
// skipped, saying so, on a developer's machine, and fails in CI (CI=true),
// so that a CI machine without the tool cannot pass by checking nothing.
//
// The Python interop suite (interop/conftest.py, require_tool) follows the
// same rule.
package reftool

import (
	"fmt"
	"os"
	"testing"
)

// InCI reports whether the tests run in CI: the environment variable CI is
// "true" (as .ci/run sets it).
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing ends t because the reference tool named tool is unavailable
// (err says why): t.Fatal when CI=true, t.Skip otherwise. It never returns.
func Missing(t testing.TB, tool string, err error) {
	t.Helper()
	msg := fmt.Sprintf("reference tool %s is unavailable: %v", tool, err)
	if InCI() {
		t.Fatal(msg + " (CI=true: a missing reference tool fails the test)")
	}
	t.Skip(msg + " (skipped; with CI=true this fails)")
}

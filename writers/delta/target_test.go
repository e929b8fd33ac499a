package delta

import (
	"path/filepath"
	"testing"
)

// Two endpoints of one table, however its URI is spelled, name the same
// target (a transaction may write it through one of them only: see
// txn's refuseSharedTable); another table names another.
func TestTargetNamesTheTable(t *testing.T) {
	mem := checkedMem(t)
	dir := filepath.Join(t.TempDir(), "table")
	a := openWriter(t, testConfig("file://"+dir), mem)
	b := openWriter(t, testConfig("file://"+dir+"/"), mem)
	c := openWriter(t, testConfig(fileURI(t)), mem)
	if a.Target() != b.Target() {
		t.Fatalf("one table, targets %q and %q", a.Target(), b.Target())
	}
	if a.Target() == c.Target() {
		t.Fatalf("two tables, one target %q", a.Target())
	}
}

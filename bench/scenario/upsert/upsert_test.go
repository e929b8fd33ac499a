package upsert

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunSmall runs the scenario on a small table: both modes report a
// line, and the deletion-vector mode marks files instead of rewriting them
// (runMode itself checks the table's row count after every upsert).
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("a benchmark run: skipped with -short")
	}
	var out bytes.Buffer
	o := Options{TableRows: 20_000, ChangeRows: 2_000, Runs: 2, Codec: "snappy"}
	if err := Run(context.Background(), o, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := map[string][]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines[f[0]] = f
		}
	}
	// target rows/s seconds rewritten marked added MiB RSS
	cow, dv := lines["quiver-copy-on-write"], lines["quiver-deletion-vectors"]
	if len(cow) < 7 || len(dv) < 7 {
		t.Fatalf("report lacks a mode:\n%s", out.String())
	}
	if cow[3] == "0" || cow[4] != "0" || dv[3] != "0" || dv[4] == "0" {
		t.Errorf("copy-on-write rewrote %s and marked %s files, deletion vectors rewrote %s and marked %s: want rewrites only, then marks only\n%s",
			cow[3], cow[4], dv[3], dv[4], out.String())
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{TableRows: 0, ChangeRows: 10, Runs: 1}, {TableRows: 10, ChangeRows: 1, Runs: 1}, {TableRows: 10, ChangeRows: 10, Runs: 11}} {
		if err := Run(context.Background(), o, io.Discard, io.Discard); err == nil {
			t.Errorf("Run(%+v) accepted bad sizes", o)
		}
	}
}

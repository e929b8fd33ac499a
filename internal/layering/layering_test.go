// Package layering checks the import rules of docs/design.md over the
// module's real import graph (go list): what the package doc comments
// say each layer must not import, enforced.
package layering

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/quiver-ingest/quiver/"

// A rule forbids packages matching from to depend on packages matching
// to: transitively, or with direct only through their own imports.
type rule struct {
	from, except, to []string
	direct           bool
	why              string
}

// Patterns are package paths relative to the module; "x/..." matches x
// and every package below it.
var (
	sinks        = []string{"writers/delta", "writers/lance", "writers/kafka", "writers/discard"}
	aboveSinks   = []string{"server/...", "flightsvc/...", "txn/...", "bench/...", "clients/..."}
	testSupport  = []string{"internal/testpoll", "internal/reftool", "internal/deltagolden", "internal/emulator", "internal/duckcheck", "internal/alloccheck", "internal/lanceprobe/probetest", "writers/writertest/...", "writers/storage/storagetest", "writers/lance/internal/lancetest"}
	formatLibs   = []string{"writers/delta/deltalog/...", "writers/delta/deltalayout", "writers/delta/deltaupsert", "writers/delta/deltaexpr", "writers/parquetio/...", "writers/kafka/kafkaenc/...", "writers/lance/lancefile/...", "writers/lance/lancetable", "writers/lance/lancepb/...", "writers/storage", "merge/..."}
	belowService = []string{"flightsvc/groupcommit", "txn/...", "writers/...", "merge/...", "internal/membudget", "internal/descseal", "internal/fsync", "internal/rowdigest", "internal/redact"}
)

var rules = []rule{
	{from: []string{"writers/...", "merge/..."}, to: aboveSinks,
		why: "sinks never depend on the server, the Flight service, the coordinator, the benchmarks or the clients"},
	{from: formatLibs, to: append([]string{"writers/tablesink"}, sinks...),
		why: "the protocol and format libraries know no sink"},
	{from: []string{"writers/delta/..."}, to: []string{"writers/lance/...", "writers/kafka/..."}, why: "one sink never depends on another"},
	{from: []string{"writers/lance/..."}, to: []string{"writers/delta/...", "writers/kafka/..."}, why: "one sink never depends on another"},
	{from: []string{"writers/kafka/..."}, to: []string{"writers/delta/...", "writers/lance/...", "writers/tablesink"}, why: "one sink never depends on another"},
	{from: []string{"server/cmd/quiver", "writers/...", "merge/...", "txn/...", "flightsvc/..."}, except: testSupport, to: testSupport,
		why: "the binary and the libraries link no test support"},
	{from: []string{"writers/parquetio/internal/pqfile"}, to: []string{"github.com/apache/arrow-go/...", "writers/parquetio", "writers/delta/..."},
		why: "the Parquet file framing knows nothing of Arrow, of the encoder above it or of Delta"},
	{from: []string{"writers/lance/lancefile/..."}, to: []string{"writers/lance/lancetable"},
		why: "the Lance file codec knows nothing of the table format"},
	{from: []string{"writers/delta/deltalog/...", "writers/delta/deltaexpr"}, to: []string{"writers/delta/deltalayout", "writers/delta/deltaupsert"},
		why: "the Delta protocol knows nothing of how a writer lays out or matches rows"},
	{from: []string{"writers/delta/deltalog"}, to: []string{"writers/delta/deltalog/dv"},
		why: "deletion-vector files build on the log, never the other way"},
	{from: []string{"writers/delta/deltalayout"}, to: []string{"writers/delta/deltaupsert"},
		why: "the data file layout knows nothing of upserts"},
	{from: belowService, to: []string{"google.golang.org/grpc/..."}, direct: true,
		why: "nothing below flightsvc knows gRPC"},
	{from: []string{"flightsvc/ipccheck", "internal/rowdigest", "internal/fsync"}, to: []string{"writers/...", "flightsvc", "server/...", "txn/..."},
		why: "leaf libraries import no Quiver layer"},
	{from: []string{"flightsvc/groupcommit"}, to: append([]string{"flightsvc", "txn/...", "writers/tablesink"}, sinks...),
		why: "group commits know the writers contract only"},
}

// matches reports whether pkg (relative to the module, or a foreign
// path) matches one of patterns.
func matches(pkg string, patterns []string) bool {
	for _, p := range patterns {
		if root, ok := strings.CutSuffix(p, "/..."); ok {
			if pkg == root || strings.HasPrefix(pkg, root+"/") {
				return true
			}
		} else if pkg == p {
			return true
		}
	}
	return false
}

// graph returns every package of the module with its imports (direct) or
// dependencies (transitive), module paths made relative: what the default
// build links (tests, and files behind build tags, are not covered).
func graph(t *testing.T, field string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range ."+field+"}} {{.}}{{end}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	g := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		for i := range f {
			f[i] = strings.TrimPrefix(f[i], module)
		}
		g[f[0]] = f[1:]
	}
	if len(g) < 20 {
		t.Fatalf("go list found %d packages", len(g))
	}
	return g
}

func TestImportRules(t *testing.T) {
	direct, deps := graph(t, "Imports"), graph(t, "Deps")
	for _, r := range rules {
		g := deps
		if r.direct {
			g = direct
		}
		found := false
		for pkg, imports := range g {
			if !matches(pkg, r.from) || matches(pkg, r.except) {
				continue
			}
			found = true
			for _, imp := range imports {
				if matches(imp, r.to) {
					t.Errorf("%s depends on %s: %s", pkg, imp, r.why)
				}
			}
		}
		if !found {
			t.Errorf("rule %q matches no package: update its patterns", r.why)
		}
	}
}

// The patterns name packages that exist: a renamed package must not
// silently drop out of a rule.
func TestPatternsNamePackages(t *testing.T) {
	g := graph(t, "Imports")
	for _, list := range [][]string{sinks, testSupport, formatLibs, belowService} {
		for _, p := range list {
			found := false
			for pkg := range g {
				if matches(pkg, []string{p}) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("pattern %q names no package", p)
			}
		}
	}
}

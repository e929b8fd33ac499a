package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quiver-ingest/quiver/internal/devbroker"
	"github.com/quiver-ingest/quiver/internal/npmdir"
	"github.com/quiver-ingest/quiver/internal/reftool"
)

// statusShot is where TestStatusPageInBrowser saves its screenshot (a test
// artefact; docs/status-page.png is a copy).
const statusShot = "../.cache/test-artifacts/status-page.png"

// TestStatusPageInBrowser opens the status page in Debian's chromium
// (driven by playwright-core, server/testdata/statuspage) against a server
// with an endpoint of every sink kind, a degraded one and a stuck
// precommitted transaction: every endpoint is listed, the degraded one
// shows its reason, the stuck transaction stands out, and after a put to
// each endpoint the page shows by itself the new row counts and last
// commits. The page makes no request outside the server and logs no
// console error.
func TestStatusPageInBrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		reftool.Missing(t, "chromium", err)
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			reftool.Missing(t, "node/npm", err)
		}
	}
	helper, err := npmdir.Install(npmdir.Spec{Name: "quiver-statuspage-test", Files: os.DirFS("testdata/statuspage")})
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	corruptDeltaTable(t, dir, "broken")
	kafka, err := devbroker.Start(devbroker.Options{Listen: "127.0.0.1:0", Partitions: 1, Topics: []string{"clicks"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	s := startServerWith(t, dir, fmt.Sprintf(`endpoints:
  - {name: devnull, sink: discard}
  - {name: events, sink: delta, delta: {table_uri: "file://tables/events"}}
  - {name: clicks, sink: kafka, kafka: {brokers: [%q], topic: clicks, format: json}}
  - {name: items, sink: lance, lance: {dataset_uri: "file://tables/items.lance"}}
  - {name: broken, sink: delta, delta: {table_uri: "file://tables/broken"}}
`, kafka.Addrs()[0]), Options{EndpointRetryMin: time.Hour, StatusSampleEvery: 200 * time.Millisecond, StatusStuckAfter: time.Nanosecond})
	c := dialClient(t, s)
	precommitOn(t, c, 3) // job@1 on devnull, left precommitted: stuck

	expectFile := filepath.Join(t.TempDir(), "expect.json")
	writeJSONFile(t, expectFile, map[string]any{
		"endpoints": []string{"devnull", "events", "clicks", "items", "broken"},
		"degraded":  map[string]string{"name": "broken", "reason": "corrupt delta log"},
		"stuck":     "job",
	})
	shot, err := filepath.Abs(statusShot)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(shot), 0o755); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "page.mjs", "http://"+s.HTTPAddr(), shot, expectFile)
	cmd.Dir = helper
	cmd.Env = append(os.Environ(), "QUIVER_CHROMIUM="+chromium)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr

	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	var out []string
	readUntil := func(want string) bool {
		for lines.Scan() {
			out = append(out, lines.Text())
			if lines.Text() == want || strings.HasPrefix(lines.Text(), "FAILED") {
				return lines.Text() == want
			}
		}
		return false
	}
	if !readUntil("READY") {
		cmd.Wait()
		t.Fatalf("the page before the puts:\n%s\n%s", strings.Join(out, "\n"), stderr.String())
	}
	// A put to every endpoint; the page is told what each should show
	// (rows counted since start, the commit's version or "—").
	puts := map[string]map[string]any{}
	for ep, n := range map[string]int{"devnull": 5, "events": 6, "clicks": 7, "items": 8} {
		ack, err := c.Put(ctx, ep, idReader(t, n))
		if err != nil {
			t.Fatalf("put to %s: %v", ep, err)
		}
		version := "—"
		if ack.Version != nil {
			version = strconv.FormatInt(*ack.Version, 10)
		}
		rows := n
		if ep == "devnull" {
			rows += 3 // job@1's staged rows were received too
		}
		puts[ep] = map[string]any{"rows": rows, "commit_rows": n, "version": version}
	}
	b, err := json.Marshal(puts)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(stdin, "%s\n", b)
	ok := readUntil("OK")
	if err := cmd.Wait(); err != nil || !ok {
		t.Fatalf("the page after the puts: %v\n%s\n%s", err, strings.Join(out, "\n"), stderr.String())
	}
	t.Logf("screenshot: %s", shot)
}

func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

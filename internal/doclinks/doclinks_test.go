// Package doclinks checks the project's Markdown: every relative link
// and anchor of README.md, docs/ and bench/results/ resolves, and every
// reference page of docs/ stays at most 500 lines (dated runs belong in
// bench/results/).
package doclinks

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../.."

var (
	heading = regexp.MustCompile(`(?m)^#+ (.*)$`)
	link    = regexp.MustCompile(`\]\(([A-Za-z0-9_./\-]*\.md)?(?:#([A-Za-z0-9\-_]+))?\)`)
	notWord = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	fence   = regexp.MustCompile("(?ms)^```.*?^```")
)

// anchors returns the GitHub anchors of a Markdown file's headings.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := fence.ReplaceAllString(string(b), "") // a "# comment" in a code block is no heading
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(text, -1) {
		a := notWord.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), "")
		a = strings.ReplaceAll(a, " ", "-")
		if n := seen[a]; n > 0 { // GitHub numbers repeated headings: a, a-1, a-2
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	for _, dir := range []string{"docs", "bench/results"} {
		m, err := filepath.Glob(filepath.Join(root, dir, "*.md"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found only %v", files)
	}
	return files
}

func TestLinksResolve(t *testing.T) {
	for _, f := range markdownFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := f
			if m[1] != "" {
				target = filepath.Join(filepath.Dir(f), m[1])
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s: link %s: %v", f, m[0], err)
				continue
			}
			if m[2] != "" && !anchors(t, target)[m[2]] {
				t.Errorf("%s: link %s: no heading with anchor %q in %s", f, m[0], m[2], target)
			}
		}
	}
}

func TestReferencePagesStayShort(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("docs: %v %v", pages, err)
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), "\n"); n > 500 {
			t.Errorf("%s has %d lines: a reference page keeps at most 500 (split it by topic; dated runs go to bench/results/)", p, n)
		}
	}
}

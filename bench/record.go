package bench

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/quiver-ingest/quiver/internal/redact"
)

// record is what --record keeps of a run: one Markdown file per run in a
// folder (bench/results by convention), named by its start time and
// scenario, with the command line, the build, the machine and its load
// before and after, and the report as printed. Reference pages keep one
// current table; dated runs live here.
type record struct {
	dir, scenario string
	args          []string
	start         time.Time
	loadBefore    string
	report        bytes.Buffer
}

// newRecord starts the record of a run of scenario with the flags set on
// fs, as --name=value: the values of secret flags (a token, a password, a
// key) masked and URIs redacted, as the file is meant to be committed.
func newRecord(dir, scenario string, fs *flag.FlagSet) *record {
	var args []string
	fs.Visit(func(f *flag.Flag) {
		v := redact.URI(f.Value.String())
		if secretFlag.MatchString(f.Name) {
			v = redact.Mask
		}
		args = append(args, "--"+f.Name+"="+v)
	})
	return &record{dir: dir, scenario: scenario, args: args, start: time.Now().UTC(), loadBefore: loadAverage()}
}

// secretFlag names flags whose values are secrets.
var secretFlag = regexp.MustCompile(`(?i)token|secret|password|key`)

// tee returns stdout that also writes into the record.
func (r *record) tee(stdout io.Writer) io.Writer { return io.MultiWriter(stdout, &r.report) }

// write writes the record's file and returns its path.
func (r *record) write() (string, error) {
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return "", fmt.Errorf("bench: --record: %w", err)
	}
	// Milliseconds: two runs started within a second keep their files.
	path := filepath.Join(r.dir, r.start.Format("2006-01-02-150405.000")+"-"+r.scenario+".md")
	var b strings.Builder
	fmt.Fprintf(&b, "# %s, %s\n\n", r.scenario, r.start.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "- command: `quiverbench %s`\n", strings.Join(r.args, " "))
	fmt.Fprintf(&b, "- build: %s\n", buildInfo())
	fmt.Fprintf(&b, "- machine: %s/%s, %d CPUs; load average %s before, %s after; %s\n\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), r.loadBefore, loadAverage(), time.Since(r.start).Round(time.Second))
	fmt.Fprintf(&b, "```\n%s```\n", r.report.String())
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("bench: --record: %w", err)
	}
	return path, nil
}

// buildInfo names the commit the binary was built from, and the Go
// version.
func buildInfo() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return runtime.Version()
	}
	rev, dirty := "unknown commit", ""
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = " (with uncommitted changes)"
		}
	}
	return rev + dirty + ", " + info.GoVersion
}

// loadAverage is the 1-minute load average of the machine, "?" where
// /proc does not tell.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

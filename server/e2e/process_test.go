package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quiver-ingest/quiver/internal/emulator"
	"github.com/quiver-ingest/quiver/internal/realkafka"
)

// quiverBin is the binary built once by TestMain.
var quiverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "quiver-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	quiverBin = filepath.Join(dir, "quiver")
	// "go" is the toolchain running the tests: go test puts its bin first
	// on the PATH of test processes.
	build := exec.Command("go", "build", "-race", "-o", quiverBin, "github.com/quiver-ingest/quiver/server/cmd/quiver")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building quiver:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := realkafka.Main(m).Run()
	emulator.StopAll()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one running quiver server process.
type proc struct {
	t         testing.TB
	cmd       *exec.Cmd
	flightURL string // host:port of the Flight listener
	httpURL   string // http://host:port
	exited    chan struct{}
	mu        sync.Mutex
	log       strings.Builder
}

var listenRE = regexp.MustCompile(`msg="?(flight|http) listening"? .*addr=(\S+)`)

// startQuiver runs `quiver serve --config cfg` with extra environment
// variables and waits (with a deadline) until both listeners are up.
func startQuiver(t testing.TB, cfg string, env ...string) *proc {
	t.Helper()
	return startQuiverBin(t, quiverBin, cfg, env...)
}

// startQuiverBin is startQuiver running the binary bin.
func startQuiverBin(t testing.TB, bin, cfg string, env ...string) *proc {
	t.Helper()
	p := &proc{t: t, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, "serve", "--config", cfg)
	p.cmd.Env = append(os.Environ(), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = p.cmd.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrs := make(chan [2]string, 4)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil {
				addrs <- [2]string{m[1], m[2]}
			}
		}
		io.Copy(io.Discard, stderr)
		p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.kill() })

	deadline := time.After(60 * time.Second)
	for p.flightURL == "" || p.httpURL == "" {
		select {
		case a := <-addrs:
			if a[0] == "flight" {
				p.flightURL = a[1]
			} else {
				p.httpURL = "http://" + a[1]
			}
		case <-p.exited:
			t.Fatalf("quiver exited before listening:\n%s", p.output())
		case <-deadline:
			t.Fatalf("quiver did not start listening within 60s:\n%s", p.output())
		}
	}
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// kill sends SIGKILL and waits for the process to be gone. Idempotent.
func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// waitExit waits for the process to exit by itself (a crash point).
func (p *proc) waitExit(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("quiver did not exit at the crash point:\n%s", p.output())
	}
}

// metric scrapes /metrics and returns the value of the sample whose line
// starts with name (including labels), or -1 when absent.
func (p *proc) metric(t testing.TB, name string) float64 {
	t.Helper()
	resp, err := http.Get(p.httpURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") {
			var v float64
			fmt.Sscanf(strings.TrimPrefix(line, name+" "), "%g", &v)
			return v
		}
	}
	return -1
}

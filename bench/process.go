package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// serveTimeout bounds how long Serve waits for a server to listen.
const serveTimeout = time.Minute

// Process is a `quiver serve` process started by Serve: the server alone
// in its process, so that its memory is measured without the clients'.
type Process struct {
	cmd        *exec.Cmd
	FlightAddr string // host:port of the Flight listener
	HTTPAddr   string // host:port of the operations listener
	exited     chan struct{}
	waitErr    error // cmd.Wait's, once exited is closed
	peak       int64 // the highest VmHWM read, bytes
}

// listening matches the server's "flight listening" and "http listening"
// log lines (text or JSON format).
var listening = regexp.MustCompile(`"?msg"?[=:]"?(flight|http) listening"?.*"?addr"?[=:]"?([0-9.:\[\]a-f]+)`)

// Serve runs `bin serve --config config`, its log written to logPath,
// and returns once both listeners are up (within a minute; the config's
// log level must show info lines). The caller stops it with Stop.
func Serve(ctx context.Context, bin, config, logPath string) (*Process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("bench: server log: %w", err)
	}
	p := &Process{cmd: exec.Command(bin, "serve", "--config", config), exited: make(chan struct{})}
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	p.cmd.Stdout = logFile
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("bench: start %s: %w", bin, err)
	}
	addrs := make(chan [2]string, 2)
	go func() {
		defer close(p.exited)
		defer logFile.Close()
		sc := bufio.NewScanner(io.TeeReader(pipe, logFile))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addrs <- [2]string{m[1], m[2]}
			}
		}
		io.Copy(logFile, pipe) // after an over-long line: keep the log, and the pipe drained
		p.waitErr = p.cmd.Wait()
	}()
	timeout := time.NewTimer(serveTimeout)
	defer timeout.Stop()
	for p.FlightAddr == "" || p.HTTPAddr == "" {
		select {
		case a := <-addrs:
			if a[0] == "flight" {
				p.FlightAddr = a[1]
			} else {
				p.HTTPAddr = a[1]
			}
		case <-p.exited:
			return nil, fmt.Errorf("bench: %s exited before listening: %s", bin, lastLine(logPath))
		case <-timeout.C:
			p.kill()
			return nil, fmt.Errorf("bench: %s did not listen within %v (log: %s)", bin, serveTimeout, logPath)
		case <-ctx.Done():
			p.kill()
			return nil, ctx.Err()
		}
	}
	return p, nil
}

// lastLine returns the last line of the log at path: why a server exited.
func lastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// Stop asks the server to drain (SIGTERM) and waits for it to exit,
// killing it after stopTimeout, while it keeps reading the server's peak
// RSS (PeakRSS), so that the drain counts too. A server that exits with an
// error (it crashed, or failed to drain) is an error.
func (p *Process) Stop() error {
	p.samplePeak()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	deadline := time.After(stopTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-p.exited:
			done = true
		case <-tick.C:
			p.samplePeak()
		case <-deadline:
			p.kill()
			return fmt.Errorf("bench: the server did not stop within %v of SIGTERM", stopTimeout)
		}
	}
	if p.waitErr != nil {
		return fmt.Errorf("bench: the server exited: %w", p.waitErr)
	}
	return nil
}

// samplePeak records the server's VmHWM while its memory is still there
// to read. (The exit status's ru_maxrss is no use: Linux carries the
// forking process's peak over into the child's at exec.)
func (p *Process) samplePeak() {
	if n := PeakRSSOf(p.cmd.Process.Pid); n > p.peak {
		p.peak = n
	}
}

// PeakRSS is the server's peak RSS in bytes as last read (by Stop, until
// the server exited, or now while it runs), -1 when unknown (not Linux).
func (p *Process) PeakRSS() int64 {
	select {
	case <-p.exited:
	default:
		p.samplePeak()
	}
	if p.peak == 0 {
		return -1
	}
	return p.peak
}

func (p *Process) kill() {
	p.cmd.Process.Kill()
	<-p.exited
}

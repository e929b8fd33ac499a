package emulator

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// startTimeout bounds the start of an emulator process (moto imports a
// lot of Python; two cores are shared).
const startTimeout = 90 * time.Second

// server is an emulator child process.
type server struct {
	cmd  *exec.Cmd
	out  *syncBuffer // its output, for errors
	done chan struct{}
	err  error // Wait's answer, once done is closed
	port int
}

// startServer runs the command args(port) on a free loopback port and
// waits until it answers HTTP (any status). The child dies with the test
// binary (Pdeathsig) should StopAll not run.
func startServer(name string, args func(port int) []string, env []string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	argv := args(port)
	s := &server{cmd: exec.Command(argv[0], argv[1:]...), out: &syncBuffer{}, done: make(chan struct{}), port: port}
	s.cmd.Env = append(s.cmd.Environ(), env...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(startTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/")
		if err == nil {
			resp.Body.Close()
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("%s exited before answering: %v\n%s", name, s.err, s.out)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s did not answer on port %d within %v\n%s", name, port, startTimeout, s.out)
		}
	}
}

// stop kills the process and waits for it.
func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer is a bytes.Buffer safe for the writes of a child's output
// and reads of it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 { // keep the start of a chatty log only
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

package quiver

import (
	"io"
	"net"
	"sync"
	"testing"
)

// CutProxy forwards TCP connections to a server until the test cuts them,
// as a network failure would: the client sees Unavailable and reconnects
// through the proxy, which keeps accepting.
type CutProxy struct {
	Addr string
	lis  net.Listener

	mu       sync.Mutex
	to       string
	conns    []net.Conn
	accepted int
	wg       sync.WaitGroup
}

// StartCutProxy proxies 127.0.0.1:0 to addr until the test ends. It is
// exported for the integration tests (package quiver_test).
func StartCutProxy(t *testing.T, addr string) *CutProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &CutProxy{Addr: lis.Addr().String(), to: addr, lis: lis}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = lis.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

func (p *CutProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		to := p.to
		p.mu.Unlock()
		out, err := net.Dial("tcp", to)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.accepted++
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies until either side fails, then closes both.
func (p *CutProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// SetTarget sends the next connections to addr (a restarted server).
func (p *CutProxy) SetTarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.to = addr
}

// Accepted returns how many connections reached the server.
func (p *CutProxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Cut closes every connection made so far.
func (p *CutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

package flightsvc

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/peer"

	"github.com/quiver-ingest/quiver/internal/membudget"
	"github.com/quiver-ingest/quiver/writers"
)

// Defaults of the per-client limits (Options).
const (
	defaultFirstMessageTimeout = 10 * time.Second
	defaultClientMaxStreams    = 128
)

// client is one caller's streams: a token's, or with auth off a peer
// host's. Its quota bounds what its streams hold of the memory budget.
type client struct {
	name    string
	streams int // guarded by clients.mu
	quota   *membudget.Quota
}

// clients counts the DoPut streams of each client, so that none can hold
// every stream or the whole budget (limits.client_max_streams,
// limits.client_memory_bytes).
type clients struct {
	budget     *membudget.Budget
	maxStreams int
	memory     int64

	mu sync.Mutex
	m  map[string]*client
}

// clientName names the caller of ctx: its token, or with auth off the
// host of its address (every connection from one host is one client).
func clientName(tok *Token, ctx context.Context) string {
	if tok != nil {
		return "token " + tok.Name
	}
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "peer unknown"
	}
	host, _, err := net.SplitHostPort(p.Addr.String())
	if err != nil {
		host = p.Addr.String()
	}
	return "peer " + host
}

// open counts a new stream of the client called name, refused with
// ErrExhausted once it has limits.client_max_streams; close must follow.
func (cs *clients) open(name string) (*client, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.sweepLocked()
	c := cs.m[name]
	if c == nil {
		c = &client{name: name, quota: cs.budget.Quota(name, cs.memory)}
		cs.m[name] = c
	}
	if c.streams >= cs.maxStreams {
		return nil, writers.Errorf(writers.ErrExhausted, "doput: %s already has %d streams open, its quota (limits.client_max_streams): end some before opening more, or raise limits.client_max_streams", name, c.streams)
	}
	c.streams++
	return c, nil
}

// close ends a stream of c. A client without streams that holds nothing
// is forgotten (one holding file slots is kept, or a new quota would
// start from zero while they are held); bytes a receiver that outlived
// its handler still gives back go to the forgotten quota, which is
// harmless.
func (cs *clients) close(c *client) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c.streams--
	if c.streams == 0 && cs.m[c.name] == c && c.quota.Idle() {
		delete(cs.m, c.name)
	}
}

// sweepLocked forgets up to two clients (the map's iteration starts at
// random) that close kept because they still held something then, and that
// have since given it back: without it, every peer host whose last stream's
// receiver outlived its handler would stay in the map.
func (cs *clients) sweepLocked() {
	seen := 0
	for name, c := range cs.m {
		if seen++; seen > 2 {
			return
		}
		if c.streams == 0 && c.quota.Idle() {
			delete(cs.m, name)
		}
	}
}

// streams returns the open streams of the client called name.
func (cs *clients) streams(name string) int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c := cs.m[name]; c != nil {
		return c.streams
	}
	return 0
}

package flightsvc

import (
	"context"
	"strconv"
	"sync/atomic"

	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"

	"github.com/quiver-ingest/quiver/txn"
)

// ConnTagger returns the gRPC stats handler that gives every client
// connection an id of its own, which the coordinator takes for the
// caller's connection (txn.WithConn): a put naming no attempt joins only
// an attempt begun on the same connection. A peer address alone is not
// enough: a client that crashed and its replacement may reach the server
// from the same address and port. Install it with grpc.StatsHandler; a
// server without it falls back to the peer address. Clients behind an
// HTTP/2 proxy share the proxy's connections: they must name their
// attempt (docs/transactions.md).
func ConnTagger() stats.Handler { return &connTagger{} }

type connTagger struct{ last atomic.Uint64 }

type connIDKey struct{}

func (h *connTagger) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return context.WithValue(ctx, connIDKey{}, "conn-"+strconv.FormatUint(h.last.Add(1), 10))
}

func (*connTagger) HandleConn(context.Context, stats.ConnStats)                     {}
func (*connTagger) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (*connTagger) HandleRPC(context.Context, stats.RPCStats)                       {}

// withConn returns ctx naming the caller's connection for the
// coordinator (txn.WithConn): its ConnTagger id, else the peer address.
func withConn(ctx context.Context) context.Context {
	if id, ok := ctx.Value(connIDKey{}).(string); ok {
		return txn.WithConn(ctx, id)
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return txn.WithConn(ctx, p.Addr.String())
	}
	return ctx
}

package quiver

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Client talks to one Quiver server over one gRPC connection. It is safe
// for concurrent use; Close it when done.
type Client struct {
	conn *grpc.ClientConn
	fc   flight.Client
	mem  memory.Allocator

	closeOnce sync.Once
	closeErr  error
}

// Dial returns a client for the server at addr ("host:port"). The
// connection is made lazily, so an unreachable server shows up as an
// Unavailable error on the first call, not here; Dial fails only on bad
// options (unreadable TLS files, contradictory settings).
func Dial(addr string, opts ...Option) (*Client, error) {
	o := options{maxMsgBytes: DefaultMaxMessageBytes, mem: memory.DefaultAllocator}
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	tlsCfg, err := o.tls()
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(o.maxMsgBytes),
			grpc.MaxCallSendMsgSize(o.maxMsgBytes),
		),
	}
	if o.token != "" {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(bearer{token: o.token}))
	}
	dialOpts = append(dialOpts, o.dialOpts...)
	conn, err := grpc.NewClient(addr, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("quiver: dial %s: %w", addr, err)
	}
	return &Client{conn: conn, fc: flight.NewClientFromConn(conn, nil), mem: o.mem}, nil
}

// Close closes the connection; calls in flight fail with Canceled. Close
// is idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.conn.Close() })
	if c.closeErr != nil {
		return fmt.Errorf("quiver: close: %w", c.closeErr)
	}
	return nil
}

// bearer adds the token to every call's metadata.
type bearer struct{ token string }

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is false so that a token also works on a
// plaintext loopback connection, which the server allows for local use.
func (b bearer) RequireTransportSecurity() bool { return false }

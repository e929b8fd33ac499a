// Package quiverflag registers the connection flags that Quiver's
// command-line tools share (quiver put/endpoints/action/bench and
// quiverbench) and dials a client from them, so that every tool spells
// --addr, --token and the TLS flags the same way.
package quiverflag

import (
	"flag"
	"os"

	quiver "github.com/quiver-ingest/quiver/clients/go"
)

// DefaultAddr is the server address the tools use unless told otherwise.
const DefaultAddr = "127.0.0.1:8815"

// Conn holds the parsed connection flags.
type Conn struct {
	Addr    string
	Token   string
	TLS     bool
	TLSCA   string
	TLSCert string
	TLSKey  string
}

// Register adds --addr (default addr), --token (default $QUIVER_TOKEN),
// --tls, --tls-ca, --tls-cert and --tls-key to fs. The returned Conn is
// filled in when fs is parsed.
func Register(fs *flag.FlagSet, addr string) *Conn {
	c := &Conn{}
	fs.StringVar(&c.Addr, "addr", addr, "server address host:port")
	fs.StringVar(&c.Token, "token", os.Getenv("QUIVER_TOKEN"), "bearer token (default $QUIVER_TOKEN)")
	fs.BoolVar(&c.TLS, "tls", false, "connect with TLS, trusting the system roots (implied by the other --tls-* flags)")
	fs.StringVar(&c.TLSCA, "tls-ca", "", "PEM CA bundle to trust instead of the system roots")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "PEM client certificate for mTLS (with --tls-key)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM client key for mTLS (with --tls-cert)")
	return c
}

// Dial connects to c.Addr with the token and TLS settings of the flags,
// then opts.
func (c *Conn) Dial(opts ...quiver.Option) (*quiver.Client, error) {
	var base []quiver.Option
	if c.Token != "" {
		base = append(base, quiver.WithToken(c.Token))
	}
	if c.TLS || c.TLSCA != "" || c.TLSCert != "" || c.TLSKey != "" {
		base = append(base, quiver.WithTLSFiles(c.TLSCA, c.TLSCert, c.TLSKey))
	}
	return quiver.Dial(c.Addr, append(base, opts...)...)
}

package quiver

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
)

// DefaultMaxMessageBytes is the default limit on one gRPC message in either
// direction: one 65,536-row batch of a typical schema is about 4.5 MB, over
// gRPC's own 4 MiB default.
const DefaultMaxMessageBytes = 64 << 20

// Option configures [Dial].
type Option func(*options)

type options struct {
	token       string
	tlsConfig   *tls.Config
	tlsFiles    *tlsFiles
	maxMsgBytes int
	mem         memory.Allocator
	dialOpts    []grpc.DialOption
}

type tlsFiles struct{ ca, cert, key string }

// WithToken sends "authorization: Bearer <token>" on every call. An empty
// token sends nothing (the default).
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithTLS connects with TLS using cfg. The default is plaintext, which the
// server accepts only on loopback listeners.
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tlsConfig = cfg } }

// WithTLSFiles connects with TLS, trusting the PEM CA bundle in caFile (the
// system roots when empty) and presenting the client certificate in
// certFile/keyFile when both are set (mTLS). Files are read by Dial.
func WithTLSFiles(caFile, certFile, keyFile string) Option {
	return func(o *options) { o.tlsFiles = &tlsFiles{ca: caFile, cert: certFile, key: keyFile} }
}

// WithMaxMessageBytes bounds one gRPC message sent or received. The default
// is [DefaultMaxMessageBytes]; it must cover the largest encoded batch.
func WithMaxMessageBytes(n int) Option { return func(o *options) { o.maxMsgBytes = n } }

// WithAllocator sets the allocator used to encode batches (compression
// buffers); the default is memory.DefaultAllocator.
func WithAllocator(mem memory.Allocator) Option { return func(o *options) { o.mem = mem } }

// WithDialOptions appends raw gRPC dial options (interceptors, a custom
// dialer). They are applied after the options above.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOpts = append(o.dialOpts, opts...) }
}

func (o *options) validate() error {
	if o.tlsConfig != nil && o.tlsFiles != nil {
		return errors.New("quiver: dial: WithTLS and WithTLSFiles both given; use one")
	}
	if o.maxMsgBytes < 0 {
		return fmt.Errorf("quiver: dial: max message bytes %d is negative", o.maxMsgBytes)
	}
	if o.tlsFiles != nil && (o.tlsFiles.cert == "") != (o.tlsFiles.key == "") {
		return errors.New("quiver: dial: a client certificate needs both the cert and the key file")
	}
	return nil
}

// tls returns the TLS config to dial with, or nil for plaintext.
func (o *options) tls() (*tls.Config, error) {
	if o.tlsFiles == nil {
		return o.tlsConfig, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.tlsFiles.ca != "" {
		pem, err := os.ReadFile(o.tlsFiles.ca)
		if err != nil {
			return nil, fmt.Errorf("quiver: dial: read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("quiver: dial: CA file %s holds no PEM certificate", o.tlsFiles.ca)
		}
		cfg.RootCAs = pool
	}
	if o.tlsFiles.cert != "" {
		cert, err := tls.LoadX509KeyPair(o.tlsFiles.cert, o.tlsFiles.key)
		if err != nil {
			return nil, fmt.Errorf("quiver: dial: load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

package server

import (
	"crypto/tls"
	"crypto/x509"
	"os"

	"github.com/quiver-ingest/quiver/server/config"
	"github.com/quiver-ingest/quiver/writers"
)

// tlsConfig loads the Flight listener's certificates: nil when TLS is off;
// with client_ca_file, clients must present a certificate signed by one of
// those CAs (mutual TLS).
func tlsConfig(c config.TLS) (*tls.Config, error) {
	if !c.Enabled() {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, writers.Errorf(writers.ErrInvalid, "server: tls.cert_file %s / tls.key_file %s: %w (give a PEM certificate and its private key)", c.CertFile, c.KeyFile, err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.ClientCAFile != "" {
		pem, err := os.ReadFile(c.ClientCAFile)
		if err != nil {
			return nil, writers.Errorf(writers.ErrInvalid, "server: tls.client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, writers.Errorf(writers.ErrInvalid, "server: tls.client_ca_file %s holds no PEM certificate", c.ClientCAFile)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

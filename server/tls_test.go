package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files.
type testPKI struct {
	caFile, certFile, keyFile string
	roots                     *x509.CertPool
	client                    tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "quiver test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(serial int64, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: "quiver test"},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	p := &testPKI{
		caFile:   filepath.Join(dir, "ca.pem"),
		certFile: filepath.Join(dir, "server.pem"),
		keyFile:  filepath.Join(dir, "server.key"),
		roots:    x509.NewCertPool(),
	}
	p.roots.AddCert(ca)
	writePEM(t, p.caFile, "CERTIFICATE", caDER)
	der, key := issue(2, x509.ExtKeyUsageServerAuth)
	writePEM(t, p.certFile, "CERTIFICATE", der)
	writePEM(t, p.keyFile, "EC PRIVATE KEY", marshalKey(t, key))
	der, key = issue(3, x509.ExtKeyUsageClientAuth)
	p.client = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func marshalKey(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	b, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func healthCheck(t *testing.T, addr string, tc *tls.Config) error {
	t.Helper()
	conn := dial(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	_, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	return err
}

func TestTLS(t *testing.T) {
	pki := newTestPKI(t)
	s := startServer(t, twoEndpoints+"tls: {cert_file: "+pki.certFile+", key_file: "+pki.keyFile+"}\n")
	if err := healthCheck(t, s.FlightAddr(), &tls.Config{RootCAs: pki.roots}); err != nil {
		t.Errorf("health over TLS: %v", err)
	}
	conn := dial(t, s.FlightAddr()) // plaintext
	if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err == nil {
		t.Error("a plaintext client reached a TLS server")
	}
}

func TestMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	s := startServer(t, twoEndpoints+"tls: {cert_file: "+pki.certFile+", key_file: "+pki.keyFile+", client_ca_file: "+pki.caFile+"}\n")
	if err := healthCheck(t, s.FlightAddr(), &tls.Config{RootCAs: pki.roots}); err == nil {
		t.Error("a client without a certificate passed mutual TLS")
	}
	if err := healthCheck(t, s.FlightAddr(), &tls.Config{RootCAs: pki.roots, Certificates: []tls.Certificate{pki.client}}); err != nil {
		t.Errorf("client with a certificate: %v", err)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	pki := newTestPKI(t)
	tests := []struct {
		name string
		tls  string
		want string
	}{
		{"missing key", "{cert_file: " + pki.certFile + ", key_file: /nonexistent.key}", "tls.key_file /nonexistent.key"},
		{"CA file without certificates", "{cert_file: " + pki.certFile + ", key_file: " + pki.keyFile + ", client_ca_file: " + pki.keyFile + "}", "holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseTestConfig(t, twoEndpoints+"tls: "+tt.tls+"\n")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := New(cfg, Options{}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want an error containing %q", err, tt.want)
			}
			if _, err := Check(t.Context(), cfg, Options{}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

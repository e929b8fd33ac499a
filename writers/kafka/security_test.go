package kafka_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/realkafka"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/kafka"
	"github.com/quiver-ingest/quiver/writers/kafka/kafkaenc/srfake"
)

// TestSecurityConfigValidate: the tls, sasl and schema registry keys are
// checked at load, naming the key; a password comes only from an
// environment variable or a file and never appears in an error.
func TestSecurityConfigValidate(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret-in-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("QUIVER_TEST_PW", "s3cret-in-env")
	t.Setenv("QUIVER_TEST_EMPTY", "")
	ca := filepath.Join(dir, "not-a-ca.pem")
	if err := os.WriteFile(ca, []byte("s3cret-in-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	sasl := func(mech string, s kafka.Secret) func(*kafka.Config) {
		return func(c *kafka.Config) {
			c.TLS = &kafka.TLS{}
			c.SASL = &kafka.SASL{Mechanism: mech, Username: "quiver", Secret: s}
		}
	}
	cases := []struct {
		name   string
		change func(*kafka.Config)
		want   string // "" = valid
	}{
		{"scram from env", sasl(kafka.MechanismSCRAMSHA512, kafka.Secret{PasswordEnv: "QUIVER_TEST_PW"}), ""},
		{"plain from file", sasl(kafka.MechanismPlain, kafka.Secret{PasswordFile: pwFile}), ""},
		{"bad mechanism", sasl("GSSAPI", kafka.Secret{PasswordEnv: "QUIVER_TEST_PW"}), "sasl.mechanism: \"GSSAPI\" is not a mechanism"},
		{"no password", sasl(kafka.MechanismSCRAMSHA256, kafka.Secret{}), "sasl: password_env or password_file is required"},
		{"both", sasl(kafka.MechanismSCRAMSHA256, kafka.Secret{PasswordEnv: "QUIVER_TEST_PW", PasswordFile: pwFile}), "not both"},
		{"unset env", sasl(kafka.MechanismSCRAMSHA256, kafka.Secret{PasswordEnv: "QUIVER_TEST_EMPTY"}), "QUIVER_TEST_EMPTY is not set or empty"},
		{"missing file", sasl(kafka.MechanismSCRAMSHA256, kafka.Secret{PasswordFile: filepath.Join(dir, "nope")}), "password_file"},
		{"no user", func(c *kafka.Config) {
			sasl(kafka.MechanismSCRAMSHA256, kafka.Secret{PasswordEnv: "QUIVER_TEST_PW"})(c)
			c.SASL.Username = ""
		}, "sasl.username: required"},
		{"plain without tls", func(c *kafka.Config) {
			sasl(kafka.MechanismPlain, kafka.Secret{PasswordEnv: "QUIVER_TEST_PW"})(c)
			c.TLS = nil
		}, "PLAIN sends the password in clear text"},
		{"bad ca", func(c *kafka.Config) { c.TLS = &kafka.TLS{CAFile: ca} }, "tls: ca_file " + ca + " holds no PEM certificate"},
		{"cert without key", func(c *kafka.Config) { c.TLS = &kafka.TLS{CertFile: ca} }, "tls: cert_file and key_file go together"},
		{"registry basic auth over http", func(c *kafka.Config) {
			c.SchemaRegistry.URL = "http://registry:8081"
			c.SchemaRegistry.BasicAuth = &kafka.BasicAuth{Username: "u", Secret: kafka.Secret{PasswordEnv: "QUIVER_TEST_PW"}}
		}, "schema_registry.basic_auth: sends the password in clear text"},
		{"registry tls", func(c *kafka.Config) {
			c.SchemaRegistry.URL = "https://registry:8081"
			c.SchemaRegistry.TLS = &kafka.TLS{CAFile: filepath.Join(dir, "nope.pem")}
		}, "schema_registry.tls: ca_file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantValidate(t, tc.change, tc.want) })
	}
}

// TestSASLMechanisms: the sink produces and reads its markers over the
// real broker's SASL_SSL listener with each mechanism.
func TestSASLMechanisms(t *testing.T) {
	b := realkafka.ForTest(t)
	for _, mech := range []string{kafka.MechanismPlain, kafka.MechanismSCRAMSHA256} { // SCRAM-SHA-512: forEachCluster
		t.Run(mech, func(t *testing.T) {
			mem := checkedMem(t)
			c := realCluster{b: b, mechanism: mech}
			topic := uniqueTopic("sasl")
			w := openWriter(t, newConfig(c, topic, func(cfg *kafka.Config) {
				cfg.CreateTopic = &kafka.CreateTopic{Partitions: 1, ReplicationFactor: 1}
			}), t.TempDir(), mem)
			commitTxn(t, w, mem, writers.TxnKey{Writer: "job", Epoch: 1}, `[{"user":"a","n":1}]`)
			if e, ok, err := w.CommittedEpoch(context.Background(), "job"); err != nil || !ok || e != 1 {
				t.Fatalf("CommittedEpoch = %d, %v, %v; want 1", e, ok, err)
			}
			if n := len(readCommitted(t, c.Addrs(), topic)); n != 1 {
				t.Fatalf("%d records, want 1", n)
			}
		})
	}
}

// TestBrokerRefusesCredentials: a wrong password, or a broker certificate
// the configured CA did not sign, fails Open at once with Unauthenticated
// (not retryable) naming the brokers and the mechanism, never the
// password.
func TestBrokerRefusesCredentials(t *testing.T) {
	b := realkafka.ForTest(t)
	wrong := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(wrong, []byte("not-"+b.Password), 0o600); err != nil {
		t.Fatal(err)
	}
	otherCA := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(otherCA, []byte(testCA), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		change func(*kafka.Config)
		want   string
	}{
		{"wrong password", func(cfg *kafka.Config) { cfg.SASL.PasswordFile = wrong },
			"SASL authentication failed for user quiver with SCRAM-SHA-512"},
		{"untrusted certificate", func(cfg *kafka.Config) { cfg.TLS.CAFile = otherCA }, "TLS handshake failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := realCluster{b: b, mechanism: kafka.MechanismSCRAMSHA512}
			cfg := newConfig(c, uniqueTopic("refused"), func(cfg *kafka.Config) {
				cfg.CreateTopic = &kafka.CreateTopic{Partitions: 1, ReplicationFactor: 1}
				tc.change(cfg)
			})
			w, err := kafka.New(cfg, writers.Env{Endpoint: "ep", DataDir: t.TempDir(), Allocator: memory.DefaultAllocator})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close(context.Background())
			for _, call := range []func(context.Context) error{w.Check, w.Open} {
				err := call(context.Background())
				if !errors.Is(err, writers.ErrUnauthenticated) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), b.SASLSSL) {
					t.Fatalf("got %v, want Unauthenticated naming %s and containing %q", err, b.SASLSSL, tc.want)
				}
				if strings.Contains(err.Error(), b.Password) {
					t.Fatalf("the error shows the password: %v", err)
				}
			}
		})
	}
}

// testCA is a CA certificate that signed nothing the tests use.
const testCA = `-----BEGIN CERTIFICATE-----
MIIBhTCCASugAwIBAgIQIRi6zePL6mKjOipn+dNuaTAKBggqhkjOPQQDAjASMRAw
DgYDVQQKEwdBY21lIENvMB4XDTE3MTAyMDE5NDMwNloXDTE4MTAyMDE5NDMwNlow
EjEQMA4GA1UEChMHQWNtZSBDbzBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABD0d
7VNhbWvZLWPuj/RtHFjvtJBEwOkhbN/BnnE8rnZR8+sbwnc/KhCk3FhnpHZnQz7B
5aETbbIgmuvewdjvSBSjYzBhMA4GA1UdDwEB/wQEAwICpDATBgNVHSUEDDAKBggr
BgEFBQcDATAPBgNVHRMBAf8EBTADAQH/MCkGA1UdEQQiMCCCDmxvY2FsaG9zdDo1
NDUzgg4xMjcuMC4wLjE6NTQ1MzAKBggqhkjOPQQDAgNIADBFAiEA2zpJEPQyz6/l
Wf86aX6PepsntZv2GYlA5UpabfT2EZICICpJ5h/iI+i341gBmLiAFQOyTDT+/wQc
6MF9+Yw1Yy0t
-----END CERTIFICATE-----`

// TestRegistryTLSAndBasicAuth: the Avro format reaches an https Schema
// Registry signed by its own CA with basic authentication; a wrong
// password is Unauthenticated without the password in the error.
func TestRegistryTLSAndBasicAuth(t *testing.T) {
	mem := checkedMem(t)
	c := startCluster(t)
	fake := srfake.Start(t)
	const user, pw = "quiver", "registry-s3cret"
	reg := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != pw {
			http.Error(w, `{"error_code":401,"message":"Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		fake.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(reg.Close)
	ca := filepath.Join(t.TempDir(), "registry-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: reg.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("QUIVER_TEST_REGISTRY_PW", pw)
	t.Setenv("QUIVER_TEST_REGISTRY_WRONG", "not-"+pw)
	cfgFor := func(pwEnv string) *kafka.Config {
		return newConfig(c, uniqueTopic("avro-tls"), func(cfg *kafka.Config) {
			cfg.Format = kafka.FormatAvro
			cfg.SchemaRegistry = kafka.SchemaRegistry{URL: reg.URL, Compatibility: "backward",
				TLS: &kafka.TLS{CAFile: ca}, BasicAuth: &kafka.BasicAuth{Username: user, Secret: kafka.Secret{PasswordEnv: pwEnv}}}
			cfg.CreateTopic = &kafka.CreateTopic{Partitions: 1, ReplicationFactor: 1}
		})
	}

	cfg := cfgFor("QUIVER_TEST_REGISTRY_PW")
	w := openWriter(t, cfg, t.TempDir(), mem)
	if err := commitAuto(t, w, record(t, mem, rowsSchema, `[{"user":"a","n":1}]`)); err != nil {
		t.Fatal(err)
	}
	if got := fake.Versions(cfg.Topic + "-value"); len(got) != 1 {
		t.Fatalf("registered versions %v, want one", got)
	}

	bad, err := kafka.New(cfgFor("QUIVER_TEST_REGISTRY_WRONG"), writers.Env{Endpoint: "ep", DataDir: t.TempDir(), Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close(context.Background())
	err = bad.Check(context.Background())
	if !errors.Is(err, writers.ErrUnauthenticated) || strings.Contains(err.Error(), pw) {
		t.Fatalf("Check with a wrong registry password: %v, want Unauthenticated without the password", err)
	}
}

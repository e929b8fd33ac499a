package kafka

import (
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/xdg-go/scram"

	"github.com/quiver-ingest/quiver/writers"
)

// SASL mechanisms (SASL.Mechanism).
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
)

// TLS is a `tls:` section: the connection is encrypted and the server's
// certificate verified against CAFile (the system roots when empty).
// CertFile and KeyFile, together, are the client certificate of mutual TLS.
type TLS struct {
	CAFile     string `yaml:"ca_file"`
	CertFile   string `yaml:"cert_file"`
	KeyFile    string `yaml:"key_file"`
	ServerName string `yaml:"server_name"` // "" verifies the host of the address dialled
	// InsecureSkipVerify accepts any server certificate: for tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// Secret names where a password is read: an environment variable or a
// file (its content with trailing line breaks removed). The YAML never
// holds the password itself, so it never reaches a log, an error or a
// listing of the config.
type Secret struct {
	PasswordEnv  string `yaml:"password_env"`
	PasswordFile string `yaml:"password_file"`
}

// SASL is the `sasl:` section of the brokers.
type SASL struct {
	Mechanism string `yaml:"mechanism"`
	Username  string `yaml:"username"`
	Secret    `yaml:",inline"`
}

// BasicAuth is the HTTP basic authentication of the Schema Registry.
type BasicAuth struct {
	Username string `yaml:"username"`
	Secret   `yaml:",inline"`
}

// password reads the secret. The error names the variable or file, never
// a value.
func (s Secret) password() (string, error) {
	switch {
	case s.PasswordEnv != "" && s.PasswordFile != "":
		return "", errors.New("set password_env or password_file, not both")
	case s.PasswordEnv != "":
		v := os.Getenv(s.PasswordEnv)
		if v == "" {
			return "", fmt.Errorf("environment variable %s is not set or empty (password_env)", s.PasswordEnv)
		}
		return v, nil
	case s.PasswordFile != "":
		b, err := os.ReadFile(s.PasswordFile)
		if err != nil {
			return "", fmt.Errorf("password_file: %w", err)
		}
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", fmt.Errorf("password_file %s is empty", s.PasswordFile)
		}
		return v, nil
	}
	return "", errors.New("password_env or password_file is required")
}

// config loads the files of t into a *tls.Config. Errors name the file.
func (t *TLS) config() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s holds no PEM certificate", t.CAFile)
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("cert_file and key_file go together (the client certificate of mutual TLS)")
	}
	if t.CertFile != "" {
		// The error of LoadX509KeyPair names what is wrong, not the key.
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cert_file %s, key_file %s: %w", t.CertFile, t.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// validateSecurity reports the problems of the tls, sasl and registry
// security keys through bad (key, message).
func (c *Config) validateSecurity(bad func(key, format string, args ...any)) {
	checkTLS := func(key string, t *TLS) {
		if t == nil {
			return
		}
		if _, err := t.config(); err != nil {
			bad(key, "%v", err)
		}
	}
	checkTLS("tls", c.TLS)
	checkTLS("schema_registry.tls", c.SchemaRegistry.TLS)
	if s := c.SASL; s != nil {
		switch s.Mechanism {
		case MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		default:
			bad("sasl.mechanism", "%q is not a mechanism: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism)
		}
		if s.Username == "" {
			bad("sasl.username", "required")
		}
		if _, err := s.password(); err != nil {
			bad("sasl", "%v", err)
		}
		if s.Mechanism == MechanismPlain && c.TLS == nil {
			// PLAIN sends the password as it is.
			bad("sasl.mechanism", "PLAIN sends the password in clear text: set tls too")
		}
	}
	if b := c.SchemaRegistry.BasicAuth; b != nil {
		if b.Username == "" {
			bad("schema_registry.basic_auth.username", "required")
		}
		if _, err := b.password(); err != nil {
			bad("schema_registry.basic_auth", "%v", err)
		}
		if strings.HasPrefix(c.SchemaRegistry.URL, "http://") {
			bad("schema_registry.basic_auth", "sends the password in clear text over %s: use https://", c.SchemaRegistry.URL)
		}
	}
}

// ClientConfig returns the sarama configuration every client of the sink
// starts from: client id, protocol version and the brokers' TLS and SASL
// settings, so that producers, the admin and the marker reads connect
// alike (and quiverbench's bare sarama baseline connects as the sink
// does).
func (c *Config) ClientConfig() (*sarama.Config, error) {
	sc := sarama.NewConfig()
	sc.ClientID = "quiver"
	sc.Version = sarama.V3_6_0_0
	if c.TLS != nil {
		tc, err := c.TLS.config()
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		sc.Net.TLS.Enable, sc.Net.TLS.Config = true, tc
	}
	if s := c.SASL; s != nil {
		pw, err := s.password()
		if err != nil {
			return nil, fmt.Errorf("sasl: %w", err)
		}
		sc.Net.SASL.Enable = true
		sc.Net.SASL.Handshake = true
		sc.Net.SASL.User, sc.Net.SASL.Password = s.Username, pw
		switch s.Mechanism {
		case MechanismSCRAMSHA256:
			sc.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
			sc.Net.SASL.SCRAMClientGeneratorFunc = scramClient(scram.HashGeneratorFcn(sha256.New))
		case MechanismSCRAMSHA512:
			sc.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
			sc.Net.SASL.SCRAMClientGeneratorFunc = scramClient(scram.HashGeneratorFcn(sha512.New))
		default:
			sc.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		}
	}
	return sc, nil
}

// registryOpts are the sr client options of the schema_registry section:
// its TLS and basic authentication.
func (c *Config) registryOpts() ([]sr.ClientOpt, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if t := c.SchemaRegistry.TLS; t != nil {
		tc, err := t.config()
		if err != nil {
			return nil, fmt.Errorf("schema_registry.tls: %w", err)
		}
		tr.TLSClientConfig = tc
	}
	opts := []sr.ClientOpt{sr.URLs(c.SchemaRegistry.URL),
		sr.HTTPClient(&http.Client{Transport: limitedBodies{tr}, Timeout: openTimeout})}
	if b := c.SchemaRegistry.BasicAuth; b != nil {
		pw, err := b.password()
		if err != nil {
			return nil, fmt.Errorf("schema_registry.basic_auth: %w", err)
		}
		opts = append(opts, sr.BasicAuth(b.Username, pw))
	}
	return opts, nil
}

// maxRegistryAnswer bounds a Schema Registry answer (an id, an error
// message): the sr client reads answers whole, and the registry is
// another process.
const maxRegistryAnswer = 1 << 20

// limitedBodies fails a read of a response body past maxRegistryAnswer.
type limitedBodies struct{ http.RoundTripper }

func (l limitedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.RoundTripper.RoundTrip(r)
	if resp != nil && resp.Body != nil {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxRegistryAnswer}
	}
	return resp, err
}

type limitedBody struct {
	io.ReadCloser
	left int
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n == 0 {
			return 0, err // the end, or a read error
		}
		return 0, fmt.Errorf("schema registry: an answer of more than %d bytes", maxRegistryAnswer)
	}
	n, err := b.ReadCloser.Read(p[:min(len(p), b.left)])
	b.left -= n
	return n, err
}

// scramClient adapts xdg-go/scram to sarama's SCRAMClient.
func scramClient(hash scram.HashGeneratorFcn) func() sarama.SCRAMClient {
	return func() sarama.SCRAMClient { return &scramConv{hash: hash} }
}

type scramConv struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (s *scramConv) Begin(user, password, authzID string) error {
	cl, err := s.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conv = cl.NewConversation()
	return nil
}

func (s *scramConv) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *scramConv) Done() bool                            { return s.conv.Done() }

// securityError classifies a failure to connect to the brokers: a refused
// SASL authentication or a failed TLS handshake is ErrUnauthenticated
// (retrying does not help until the credentials or certificates are
// fixed), naming the brokers and the mechanism, never the password; ok is
// false for any other error.
func (c *Config) securityError(err error) (_ error, ok bool) {
	if errors.Is(err, sarama.ErrSASLAuthenticationFailed) || errors.Is(err, sarama.ErrUnsupportedSASLMechanism) || errors.Is(err, sarama.ErrIllegalSASLState) {
		mech, user := "SASL", ""
		if c.SASL != nil {
			mech, user = c.SASL.Mechanism, c.SASL.Username
		}
		return writers.Errorf(writers.ErrUnauthenticated, "kafka: brokers %v: SASL authentication failed for user %s with %s: %v (check sasl.username, the password and sasl.mechanism)", c.Brokers, user, mech, err), true
	}
	var (
		verr *tls.CertificateVerificationError
		rerr tls.RecordHeaderError
		uerr x509.UnknownAuthorityError
		herr x509.HostnameError
	)
	// A TLS alert from the broker has no exported type: "remote error: tls: ...".
	if errors.As(err, &verr) || errors.As(err, &rerr) || errors.As(err, &uerr) || errors.As(err, &herr) ||
		strings.Contains(err.Error(), "remote error: tls: ") {
		return writers.Errorf(writers.ErrUnauthenticated, "kafka: brokers %v: TLS handshake failed: %v (check tls.ca_file, tls.server_name, the client certificate, and that the listener speaks TLS)", c.Brokers, err), true
	}
	return err, false
}

package config

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quiver-ingest/quiver/internal/descseal"
)

// validator checks a decoded config, adding problems (with the line of the
// path when the file had it) to the decoder's list.
type validator struct {
	*decoder
}

// fail records a problem at path, on the line where path (or its nearest
// ancestor present in the file) was written.
func (v *validator) fail(path, format string, args ...any) {
	v.problem(v.line(path), path, format, args...)
}

func (v *validator) line(path string) int {
	for path != "" {
		if l, ok := v.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// KnownActions are the DoAction types a token may be granted (docs/flight.md,
// "Actions"). server's tests check it against the Flight service's list.
var KnownActions = []string{"begin", "precommit", "commit", "rollback", "status", "committed-epoch", "endpoints", "health", "optimize", "vacuum"}

func (v *validator) config(c *Config) {
	v.address("listen", c.Listen)
	v.address("http_listen", c.HTTPListen)
	if c.Listen == c.HTTPListen && !strings.HasSuffix(c.Listen, ":0") {
		v.fail("http_listen", "same address as listen (%s); use another port", c.Listen)
	}
	if c.DataDir == "" {
		v.fail("data_dir", "required: the folder for the journal and local tables")
	} else {
		c.DataDir = v.resolvePath(c, c.DataDir)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		v.fail("log.level", "must be debug, info, warn or error, not %q", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		v.fail("log.format", "must be text or json, not %q", c.Log.Format)
	}
	v.auth(c)
	v.tls(c)
	v.limits(c.Limits)
	v.txn(c)
	v.embeddedKafka(c.EmbeddedKafka)
	if c.HTTP.MetricsAuth && c.Auth == nil {
		v.fail("http.metrics_auth", "needs an auth section: /metrics would accept the tokens of auth.tokens, and there are none")
	}
	v.tracing(c.Tracing)
	v.sqlName("flight_sql.catalog", c.FlightSQL.Catalog)
	v.sqlName("flight_sql.db_schema", c.FlightSQL.DBSchema)
}

// sqlNamePattern is what a Flight SQL catalog or schema name may be: an
// identifier SQL tools show and quote without surprises.
var sqlNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

func (v *validator) sqlName(key, name string) {
	if !sqlNamePattern.MatchString(name) {
		v.fail(key, "must be a letter or _ followed by up to 127 letters, digits or _, not %q", name)
	}
}

func (v *validator) tracing(t Tracing) {
	if t.OTLPEndpoint != "" {
		v.address("tracing.otlp_endpoint", t.OTLPEndpoint)
	}
	if t.SampleRatio < 0 || t.SampleRatio > 1 {
		v.fail("tracing.sample_ratio", "must be between 0 and 1, not %g", t.SampleRatio)
	}
	if t.ServiceName == "" {
		v.fail("tracing.service_name", "must not be empty")
	}
}

// Ranges of numeric settings. maxMessageBytes is flightsvc's
// MaxMessageBytesLimit and maxTTL is txn.MaxTTL (this package imports
// neither; server's tests check that both sides agree).
const (
	// maxMessageBytes keeps the gRPC receive limit (twice the message
	// plus 1 MiB) within math.MaxInt32: 1023 MiB.
	maxMessageBytes = 1<<30 - 1<<20
	maxTTL          = 7 * 24 * time.Hour
	// maxPartitions bounds the development broker's topics.
	maxPartitions = 1024
	// maxMemoryBytes is a sanity bound: 1 PiB.
	maxMemoryBytes = 1 << 50
	maxOpenFiles   = 1 << 20
	// The limits' timeouts.
	minTimeout = 100 * time.Millisecond
	maxTimeout = 24 * time.Hour
)

func (v *validator) txn(c *Config) {
	ttlOK := c.Txn.TTL > 0 && c.Txn.TTL <= maxTTL
	if !ttlOK {
		v.fail("txn.ttl", "must be a duration from 1s to %s (a week), like 15m, not %s", maxTTL, c.Txn.TTL)
	}
	if !slices.Contains([]string{"warn", "refuse", "off"}, c.Txn.ReplayCheck) {
		v.fail("txn.replay_check", "must be warn, refuse or off, not %q", c.Txn.ReplayCheck)
	}
	if c.Txn.MaxTTL < time.Second || c.Txn.MaxTTL > maxTTL {
		v.fail("txn.max_ttl", "must be a duration from 1s to %s (a week), like 24h, not %s", maxTTL, c.Txn.MaxTTL)
	} else if ttlOK && c.Txn.TTL > c.Txn.MaxTTL {
		v.fail("txn.ttl", "must be at most txn.max_ttl (%s), not %s", c.Txn.MaxTTL, c.Txn.TTL)
	}
	if c.Txn.DescriptorKeyFile == "" {
		return
	}
	c.Txn.DescriptorKeyFile = v.resolvePath(c, c.Txn.DescriptorKeyFile)
	key, err := descseal.ReadKeyFile(c.Txn.DescriptorKeyFile)
	if err != nil {
		v.fail("txn.descriptor_key_file", "%v (the file holds the descriptor key in hex, at least %d digits: openssl rand -hex %d)", err, 2*descseal.MinKeyBytes, descseal.MinKeyBytes)
		return
	}
	c.Txn.DescriptorKey = key
}

// address checks a host:port listen address.
func (v *validator) address(path, addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.fail(path, "must be host:port like 127.0.0.1:8815, not %q", addr)
		return
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		v.fail(path, "port %q must be a number from 0 to 65535", port)
	}
}

// isLoopback reports whether a listen address only accepts local clients.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (v *validator) resolvePath(c *Config, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(c.Dir, p)
}

func (v *validator) auth(c *Config) {
	if c.Auth == nil {
		if _, _, err := net.SplitHostPort(c.Listen); err == nil && !isLoopback(c.Listen) {
			// Point at listen: the missing section has no line.
			v.problem(v.line("listen"), "auth", "required because listen %q accepts remote clients: configure auth.tokens (secrets from token_env), or listen on 127.0.0.1", c.Listen)
		}
		return
	}
	if len(c.Auth.Tokens) == 0 {
		v.fail("auth.tokens", "needs at least one token (remove the auth section to disable auth, loopback listen only)")
	}
	names := make(map[string]int)
	secrets := make(map[string]int)
	for i := range c.Auth.Tokens {
		t := &c.Auth.Tokens[i]
		p := fmt.Sprintf("auth.tokens[%d]", i)
		switch first, dup := names[t.Name]; {
		case t.Name == "":
			v.fail(p+".name", "required: a name for logs and metrics")
		case dup:
			v.fail(p+".name", "%q is already the name of auth.tokens[%d]", t.Name, first)
		default:
			names[t.Name] = i
		}
		if t.TokenEnv == "" {
			v.fail(p+".token_env", "required: the environment variable holding the token's secret")
		} else if t.Secret = os.Getenv(t.TokenEnv); t.Secret == "" {
			v.fail(p+".token_env", "environment variable %s is not set or empty: set it to the token's secret", t.TokenEnv)
		} else if first, dup := secrets[t.Secret]; dup {
			v.fail(p+".token_env", "%s holds the same secret as the token of auth.tokens[%d]; give every token its own secret", t.TokenEnv, first)
		} else {
			secrets[t.Secret] = i
		}
		for j, e := range t.Endpoints {
			if e != "*" && !slices.ContainsFunc(c.Endpoints, func(ep Endpoint) bool { return ep.Name == e }) {
				v.fail(fmt.Sprintf("%s.endpoints[%d]", p, j), "no endpoint is called %q (use an endpoint name or \"*\")", e)
			}
		}
		for j, a := range t.Actions {
			if a != "*" && !slices.Contains(KnownActions, a) {
				v.fail(fmt.Sprintf("%s.actions[%d]", p, j), "unknown action %q (known: %s, or \"*\")", a, strings.Join(KnownActions, ", "))
			}
		}
		if t.Writers != nil && len(t.Writers) == 0 {
			v.fail(p+".writers", "an empty list: omit writers to allow any writer name, or list the names (\"etl-*\")")
		}
		for j, w := range t.Writers {
			if body := strings.TrimSuffix(w, "*"); body == "" && w != "*" || strings.Contains(body, "*") || len(w) > 256 {
				v.fail(fmt.Sprintf("%s.writers[%d]", p, j), "%q: use a writer name or a prefix ending in \"*\" (\"etl-*\"), at most 256 bytes", w)
			}
		}
	}
}

func (v *validator) tls(c *Config) {
	t := &c.TLS
	if (t.CertFile == "") != (t.KeyFile == "") {
		v.fail("tls", "cert_file and key_file go together: set both to serve TLS, or neither")
	}
	if t.ClientCAFile != "" && t.CertFile == "" {
		v.fail("tls.client_ca_file", "mutual TLS needs the server's own cert_file and key_file too")
	}
	for _, p := range []*string{&t.CertFile, &t.KeyFile, &t.ClientCAFile} {
		if *p != "" {
			*p = v.resolvePath(c, *p)
		}
	}
}

func (v *validator) limits(l Limits) {
	if l.MaxMessageBytes <= 0 || l.MaxMessageBytes > maxMessageBytes {
		v.fail("limits.max_message_bytes", "must be from 1 to %d (1023 MiB), not %d", maxMessageBytes, l.MaxMessageBytes)
	}
	if l.MaxStreams == 0 {
		v.fail("limits.max_streams", "must be positive")
	}
	if l.MemoryBytes > maxMemoryBytes || (l.MaxMessageBytes <= maxMessageBytes && l.MemoryBytes < l.MaxMessageBytes) {
		v.fail("limits.memory_bytes", "must be from limits.max_message_bytes (%d) to %d (1 PiB), not %d: a stream reserves one whole message before reading it", l.MaxMessageBytes, int64(maxMemoryBytes), l.MemoryBytes)
	}
	if l.EndpointBufferBytes < l.MaxMessageBytes {
		v.fail("limits.endpoint_buffer_bytes", "must be at least limits.max_message_bytes (%d), or one large batch could never fit", l.MaxMessageBytes)
	}
	if l.MaxOpenFiles < 1 || l.MaxOpenFiles > maxOpenFiles {
		v.fail("limits.max_open_files", "must be from 1 to %d, not %d", maxOpenFiles, l.MaxOpenFiles)
	}
	if l.AdmissionTimeout < minTimeout || l.AdmissionTimeout > maxTimeout {
		v.fail("limits.admission_timeout", "must be a duration from %s to %s, like 30s, not %s", minTimeout, maxTimeout, l.AdmissionTimeout)
	}
	if l.StreamIdleTimeout != 0 && (l.StreamIdleTimeout < minTimeout || l.StreamIdleTimeout > maxTimeout) {
		v.fail("limits.stream_idle_timeout", "must be 0 (off) or a duration from %s to %s, like 5m, not %s", minTimeout, maxTimeout, l.StreamIdleTimeout)
	}
	if l.FirstMessageTimeout < minTimeout || l.FirstMessageTimeout > maxTimeout {
		v.fail("limits.first_message_timeout", "must be a duration from %s to %s, like 10s, not %s", minTimeout, maxTimeout, l.FirstMessageTimeout)
	}
	if l.ClientMaxStreams < 1 {
		v.fail("limits.client_max_streams", "must be positive, not %d", l.ClientMaxStreams)
	}
	if l.ClientMemoryBytes != 0 && (l.ClientMemoryBytes < l.MaxMessageBytes || l.ClientMemoryBytes > l.MemoryBytes) {
		v.fail("limits.client_memory_bytes", "must be 0 (half of limits.memory_bytes) or from limits.max_message_bytes (%d) to limits.memory_bytes (%d), not %d", l.MaxMessageBytes, l.MemoryBytes, l.ClientMemoryBytes)
	}
	if l.ClientStagedBytes < 1 {
		v.fail("limits.client_staged_bytes", "must be positive, not %d", l.ClientStagedBytes)
	}
	if l.ClientMaxTransactions < 1 {
		v.fail("limits.client_max_transactions", "must be positive, not %d", l.ClientMaxTransactions)
	}
	if l.ClientOpenFiles < 0 || 2*l.ClientOpenFiles > l.MaxOpenFiles {
		v.fail("limits.client_open_files", "must be 0 (a quarter of limits.max_open_files) or from 1 to half of limits.max_open_files (%d), not %d", l.MaxOpenFiles/2, l.ClientOpenFiles)
	}
}

func (v *validator) embeddedKafka(k EmbeddedKafka) {
	v.address("embedded_kafka.listen", k.Listen)
	if k.Partitions < 1 || k.Partitions > maxPartitions {
		v.fail("embedded_kafka.partitions", "must be from 1 to %d, not %d", maxPartitions, k.Partitions)
	}
}

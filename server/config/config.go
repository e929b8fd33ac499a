// Package config loads and validates Quiver's YAML config (documented
// in docs/configuration.md).
//
// Loading is strict: an unknown or misspelled key is an error naming the key
// and its line, and every validation error names the YAML path
// ("endpoints[1].name: ..."). Defaults live in one place, [Default]. Each
// endpoint's sink section is decoded into the sink's own config type
// (writers.Sink.NewConfig) and validated by the sink, through the registry
// handed to [Load]; this package knows no sink.
//
// The package reads the config file, the environment (token secrets) and
// the descriptor key file (txn.descriptor_key_file, parsed by
// internal/descseal); it opens no listener and touches no data. It must not
// import flightsvc, txn or any sink package.
package config

import (
	"log/slog"
	"time"

	"github.com/quiver-ingest/quiver/internal/descseal"
	"github.com/quiver-ingest/quiver/writers"
)

// Config is a loaded, validated config. Paths in it (DataDir, TLS files)
// are absolute or relative to the process's working directory: Load
// resolves relative ones against the config file's folder.
type Config struct {
	// Listen is the Flight (gRPC) address, host:port; port 0 picks one.
	Listen string `yaml:"listen"`
	// HTTPListen serves /metrics, /healthz, /readyz and the status page.
	HTTPListen string `yaml:"http_listen"`
	// DataDir holds the journal and default table roots.
	DataDir string `yaml:"data_dir"`
	Log     Log    `yaml:"log"`
	// Auth is nil when the config has no auth section: no authentication,
	// which Load allows only on a loopback Listen address.
	Auth          *Auth         `yaml:"auth"`
	TLS           TLS           `yaml:"tls"`
	Limits        Limits        `yaml:"limits"`
	Txn           Txn           `yaml:"txn"`
	EmbeddedKafka EmbeddedKafka `yaml:"embedded_kafka"`
	HTTP          HTTP          `yaml:"http"`
	Tracing       Tracing       `yaml:"tracing"`
	FlightSQL     FlightSQL     `yaml:"flight_sql"`
	// Endpoints are decoded separately (their sink sections need the
	// registry), see rawEndpoint.
	Endpoints []Endpoint `yaml:"-"`
	// Dir is the folder of the config file; relative file:// URIs in sink
	// sections resolve against it (writers.Env.ConfigDir).
	Dir string `yaml:"-"`
}

// Log configures the server's log/slog logger.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is text or json.
	Format string `yaml:"format"`
}

// SlogLevel returns Level as a slog.Level (info for an unknown level, which
// validation rejects).
func (l Log) SlogLevel() slog.Level {
	var lv slog.Level
	if lv.UnmarshalText([]byte(l.Level)) != nil {
		return slog.LevelInfo
	}
	return lv
}

// Auth lists the bearer tokens the server accepts.
type Auth struct {
	Tokens []Token `yaml:"tokens"`
}

// Token is one bearer token and what it may do.
type Token struct {
	Name string `yaml:"name"`
	// TokenEnv names the environment variable holding the secret.
	TokenEnv string `yaml:"token_env"`
	// Endpoints the token may write to and read: names or "*".
	Endpoints []string `yaml:"endpoints"`
	// Actions the token may run: action types or "*".
	Actions []string `yaml:"actions"`
	// Writers are the writer names the token's transactions and
	// continuous streams may use: names, or prefixes ending in "*".
	// Empty: any.
	Writers []string `yaml:"writers"`
	// Secret is the value of TokenEnv, read by Load; never empty.
	Secret string `yaml:"-"`
}

// TLS configures the Flight listener's certificates. All empty: plaintext.
type TLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile enables mutual TLS: clients must present a certificate
	// signed by one of these CAs.
	ClientCAFile string `yaml:"client_ca_file"`
}

// Enabled reports whether the listener serves TLS.
func (t TLS) Enabled() bool { return t.CertFile != "" }

// Limits bound what one client can make the server hold
// (docs/operations.md, "The memory budget").
type Limits struct {
	// MaxMessageBytes bounds one Flight message (one IPC record batch body).
	MaxMessageBytes int64 `yaml:"max_message_bytes"`
	// MaxStreams bounds concurrent streams per client connection.
	MaxStreams uint32 `yaml:"max_streams"`
	// MemoryBytes is the process's memory budget: messages received,
	// batches decoded, sinks' encoder buffers and staging. Streams wait
	// for it; the Go runtime's soft memory limit is derived from it.
	MemoryBytes int64 `yaml:"memory_bytes"`
	// EndpointBufferBytes caps each endpoint's share of MemoryBytes (a
	// larger value means the whole budget).
	EndpointBufferBytes int64 `yaml:"endpoint_buffer_bytes"`
	// MaxOpenFiles bounds the file writers (Parquet, Lance) open at once.
	MaxOpenFiles int64 `yaml:"max_open_files"`
	// AdmissionTimeout is how long a new stream waits for memory (or an
	// encoder for a file writer) before ResourceExhausted.
	AdmissionTimeout time.Duration `yaml:"admission_timeout"`
	// StreamIdleTimeout cancels and rolls back a stream that receives no
	// message for this long; 0 turns it off.
	StreamIdleTimeout time.Duration `yaml:"stream_idle_timeout"`
	// FirstMessageTimeout fails a stream that sends no first message
	// (its descriptor) for this long (DeadlineExceeded).
	FirstMessageTimeout time.Duration `yaml:"first_message_timeout"`
	// ClientMaxStreams bounds the DoPut streams one client (a token; a
	// peer host without auth) has open at once.
	ClientMaxStreams int `yaml:"client_max_streams"`
	// ClientMemoryBytes bounds what one client's streams hold of
	// MemoryBytes; 0 means half of it.
	ClientMemoryBytes int64 `yaml:"client_memory_bytes"`
	// ClientMaxTransactions bounds the open and precommitted transactions
	// one token began (with auth; admin tokens are exempt).
	ClientMaxTransactions int `yaml:"client_max_transactions"`
	// ClientOpenFiles bounds the file writer slots one token's streams
	// wait for once the free slots run low (with auth); 0 means a quarter
	// of MaxOpenFiles.
	ClientOpenFiles int64 `yaml:"client_open_files"`
	// ClientStagedBytes bounds the bytes (decoded) one token's open and
	// precommitted transactions were written (with auth; admin tokens are
	// exempt).
	ClientStagedBytes int64 `yaml:"client_staged_bytes"`
}

// ClientFiles is ClientOpenFiles with its default applied.
func (l Limits) ClientFiles() int64 {
	if l.ClientOpenFiles == 0 {
		return l.MaxOpenFiles / 4
	}
	return l.ClientOpenFiles
}

// Txn configures the transaction coordinator.
type Txn struct {
	// TTL is how long a transaction may stay idle before it is rolled back.
	TTL time.Duration `yaml:"ttl"`
	// MaxTTL caps the ttl a begin may ask for (ttl_s): a begin asking
	// more is refused (InvalidArgument naming txn.max_ttl).
	MaxTTL time.Duration `yaml:"max_ttl"`
	// ReplayCheck is what a commit does when a replay of a committed
	// epoch sent other row counts than it published: warn, refuse or off
	// (txn.ReplayCheck).
	ReplayCheck string `yaml:"replay_check"`
	// DescriptorKeyFile holds the key that seals descriptors (hex, at least
	// 64 digits); servers that hand descriptors to each other share it.
	// Empty: the server generates data_dir/descriptor.key on first start.
	DescriptorKeyFile string `yaml:"descriptor_key_file"`
	// DescriptorKey is the key read from DescriptorKeyFile by Load; zero
	// when the file is not configured.
	DescriptorKey descseal.Key `yaml:"-"`
}

// EmbeddedKafka configures the in-process development Kafka broker.
type EmbeddedKafka struct {
	Enabled    bool   `yaml:"enabled"`
	Listen     string `yaml:"listen"`
	Partitions int    `yaml:"partitions"`
}

// HTTP configures the operations listener (http_listen). With auth, the
// status API always requires a token of auth.tokens (and shows only that
// token's endpoints); /healthz and /readyz never do.
type HTTP struct {
	// MetricsAuth makes /metrics require a token of auth.tokens too.
	MetricsAuth bool `yaml:"metrics_auth"`
	// Pprof serves Go's runtime profiles under /debug/pprof/ (with auth:
	// only to a token of auth.tokens). Off by default: a CPU profile costs
	// the server while it runs.
	Pprof bool `yaml:"pprof"`
}

// Tracing configures OpenTelemetry traces, exported over OTLP/gRPC. Off
// while OTLPEndpoint is empty.
type Tracing struct {
	// OTLPEndpoint is the collector's host:port.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// Insecure sends plaintext to the collector (no TLS).
	Insecure bool `yaml:"insecure"`
	// SampleRatio is the share of traces started here that are kept (a
	// client's sampled trace is always continued); 0 to 1.
	SampleRatio float64 `yaml:"sample_ratio"`
	// ServiceName is the service.name resource attribute.
	ServiceName string `yaml:"service_name"`
}

// FlightSQL names the one catalog and database schema Flight SQL lists
// the endpoints under; an ingest may give them or leave them empty.
type FlightSQL struct {
	Catalog  string `yaml:"catalog"`
	DBSchema string `yaml:"db_schema"`
}

// Enabled reports whether traces are exported.
func (t Tracing) Enabled() bool { return t.OTLPEndpoint != "" }

// Endpoint is one configured endpoint.
type Endpoint struct {
	Name string
	// Sink is the sink kind, a name in the registry ("discard").
	Sink string
	// Settings is the sink's decoded and validated section (its defaults
	// when the endpoint has no section).
	Settings writers.SinkConfig
	// Maintenance is the endpoint's maintenance section (its defaults when
	// it has none).
	Maintenance writers.Maintenance
	// Stream is the endpoint's stream section, the group commit cadence
	// of its continuous streams (its defaults when it has none).
	Stream writers.GroupCommit
}

// Default returns a config holding every default. It is the one place the
// server's defaults live; Load decodes the file on top of it.
func Default() *Config {
	return &Config{
		Listen:     "127.0.0.1:8815",
		HTTPListen: "127.0.0.1:9815",
		DataDir:    "./data",
		Log:        Log{Level: "info", Format: "text"},
		Limits: Limits{
			MaxMessageBytes:       64 << 20,
			MaxStreams:            64,
			MemoryBytes:           1 << 30,
			EndpointBufferBytes:   512 << 20,
			MaxOpenFiles:          256,
			AdmissionTimeout:      30 * time.Second,
			StreamIdleTimeout:     5 * time.Minute,
			FirstMessageTimeout:   10 * time.Second,
			ClientMaxStreams:      128,
			ClientMaxTransactions: 64,
			ClientStagedBytes:     64 << 30,
		},
		Txn:           Txn{TTL: 15 * time.Minute, MaxTTL: 24 * time.Hour, ReplayCheck: "warn"},
		EmbeddedKafka: EmbeddedKafka{Listen: "127.0.0.1:19092", Partitions: 3},
		Tracing:       Tracing{SampleRatio: 1, ServiceName: "quiver"},
		FlightSQL:     FlightSQL{Catalog: "quiver", DBSchema: "public"},
	}
}

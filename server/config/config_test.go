package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quiver-ingest/quiver/writers"
)

// fakeConfig is a sink config exercising every shape the strict decoder
// supports: scalars, a duration, lists, a nested struct, an inline struct
// and a map.
type fakeConfig struct {
	fakeCommon `yaml:",inline"`
	WriteMode  string            `yaml:"mode"`
	Keys       []string          `yaml:"merge_keys"`
	Parquet    fakeParquet       `yaml:"parquet"`
	Timeout    time.Duration     `yaml:"timeout"`
	Options    map[string]string `yaml:"options"`
}

type fakeCommon struct {
	URI string `yaml:"uri"`
}

type fakeParquet struct {
	Compression string `yaml:"compression"`
	RowGroup    int    `yaml:"row_group_rows"`
}

func (c *fakeConfig) Validate() error {
	var errs []error
	if c.URI == "" {
		errs = append(errs, errors.New("uri: required"))
	}
	if c.WriteMode != "append" && c.WriteMode != "upsert" {
		errs = append(errs, errors.New("mode: must be append or upsert"))
	}
	if c.WriteMode == "upsert" && len(c.Keys) == 0 {
		errs = append(errs, errors.New("merge_keys: required with mode upsert"))
	}
	return errors.Join(errs...)
}

func (c *fakeConfig) Mode() string { return c.WriteMode }

type noSettings struct{}

func (noSettings) Validate() error { return nil }
func (noSettings) Mode() string    { return "" }

func testRegistry() *writers.Registry {
	return writers.NewRegistry(
		writers.Sink{Name: "discard", NewConfig: func() writers.SinkConfig { return noSettings{} }},
		writers.Sink{Name: "fake", Section: "fake", NewConfig: func() writers.SinkConfig {
			return &fakeConfig{WriteMode: "append", Parquet: fakeParquet{Compression: "zstd", RowGroup: 100}}
		}, Maintains: writers.MaintenanceOps{Optimize: true, Vacuum: true}, Streams: true},
	)
}

func parse(t *testing.T, yaml string) (*Config, error) {
	t.Helper()
	return Parse([]byte(yaml), "/etc/quiver", testRegistry())
}

func TestDefaults(t *testing.T) {
	cfg, err := parse(t, "endpoints: [{name: devnull, sink: discard}]\n")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	if cfg.Listen != "127.0.0.1:8815" || cfg.HTTPListen != "127.0.0.1:9815" {
		t.Errorf("listen = %q, http_listen = %q", cfg.Listen, cfg.HTTPListen)
	}
	if cfg.DataDir != "/etc/quiver/data" {
		t.Errorf("data_dir = %q, want it resolved against the config folder", cfg.DataDir)
	}
	if cfg.Log != want.Log || cfg.Limits != want.Limits || cfg.Txn.TTL != want.Txn.TTL || cfg.Txn.DescriptorKeyFile != "" || cfg.EmbeddedKafka != want.EmbeddedKafka {
		t.Errorf("got %+v %+v %+v %+v, want defaults", cfg.Log, cfg.Limits, cfg.Txn, cfg.EmbeddedKafka)
	}
	if cfg.Limits.MaxMessageBytes != 67108864 || cfg.Limits.EndpointBufferBytes != 536870912 || cfg.Limits.MaxStreams != 64 {
		t.Errorf("limits = %+v", cfg.Limits)
	}
	if cfg.Txn.TTL != 15*time.Minute || cfg.Log.Level != "info" || cfg.Log.Format != "text" || cfg.EmbeddedKafka.Enabled {
		t.Errorf("txn %v log %+v kafka %+v", cfg.Txn, cfg.Log, cfg.EmbeddedKafka)
	}
	if cfg.Auth != nil || cfg.TLS.Enabled() {
		t.Errorf("auth %+v tls %+v, want none", cfg.Auth, cfg.TLS)
	}
	if len(cfg.Endpoints) != 1 || cfg.Endpoints[0].Name != "devnull" || cfg.Endpoints[0].Sink != "discard" || cfg.Endpoints[0].Settings == nil {
		t.Errorf("endpoints = %+v", cfg.Endpoints)
	}
}

const fullConfig = `
listen: 0.0.0.0:18815
http_listen: "[::1]:0"
data_dir: /var/lib/quiver
log: {level: debug, format: json}
auth:
  tokens:
    - name: ingest
      token_env: QUIVER_TEST_TOKEN_A
      endpoints: [events]
      actions: [precommit, commit, committed-epoch]
    - name: admin
      token_env: QUIVER_TEST_TOKEN_B
      endpoints: ["*"]
      actions: ["*"]
tls: {cert_file: certs/server.pem, key_file: /abs/server.key, client_ca_file: certs/ca.pem}
limits: {max_message_bytes: 1048576, max_streams: 8, memory_bytes: 4194304, endpoint_buffer_bytes: 2097152, max_open_files: 16, admission_timeout: 2s, stream_idle_timeout: 0s, first_message_timeout: 3s, client_max_streams: 4, client_memory_bytes: 2097152, client_max_transactions: 5, client_open_files: 3, client_staged_bytes: 1048576}
txn: {ttl: 90s, max_ttl: 2h}
embedded_kafka: {enabled: false, listen: 127.0.0.1:0, partitions: 6}
defaults: &base
  sink: fake
endpoints:
  - name: devnull
    sink: discard
  - <<: *base
    name: events
    fake:
      uri: file://./tables/events
      mode: upsert
      merge_keys: [id, region]
      parquet: {row_group_rows: 5000}
      timeout: 2m
      options: {region: eu}
`

func TestFullConfig(t *testing.T) {
	t.Setenv("QUIVER_TEST_TOKEN_A", "secret-a")
	t.Setenv("QUIVER_TEST_TOKEN_B", "secret-b")
	// "defaults" is not a key of the config: a YAML anchor needs a home,
	// and the strict decoder must still reject it.
	_, err := parse(t, fullConfig)
	wantProblems(t, err, `line 20: unknown key "defaults" (known keys: auth, data_dir, embedded_kafka, endpoints, flight_sql, http, http_listen, limits, listen, log, tls, tracing, txn)`)

	_, err = parse(t, strings.Replace(fullConfig, "defaults: &base\n  sink: fake\n", "", 1)+"\n")
	if err == nil {
		t.Fatal("merge key without its anchor parsed")
	}
	// Anchors may live inside the endpoints list itself.
	doc := strings.Replace(fullConfig, "defaults: &base\n  sink: fake\nendpoints:\n  - name: devnull\n    sink: discard\n",
		"endpoints:\n  - &base\n    name: devnull\n    sink: discard\n", 1)
	doc = strings.Replace(doc, "  - <<: *base\n", "  - <<: *base\n    sink: fake\n", 1)
	cfg, err := parse(t, doc)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "0.0.0.0:18815" || cfg.HTTPListen != "[::1]:0" || cfg.DataDir != "/var/lib/quiver" {
		t.Errorf("addresses/data_dir: %+v", cfg)
	}
	if cfg.Log != (Log{Level: "debug", Format: "json"}) || cfg.Log.SlogLevel().String() != "DEBUG" {
		t.Errorf("log = %+v", cfg.Log)
	}
	if cfg.Limits != (Limits{MaxMessageBytes: 1 << 20, MaxStreams: 8, MemoryBytes: 4 << 20, EndpointBufferBytes: 2 << 20, MaxOpenFiles: 16, AdmissionTimeout: 2 * time.Second,
		FirstMessageTimeout: 3 * time.Second, ClientMaxStreams: 4, ClientMemoryBytes: 2 << 20,
		ClientMaxTransactions: 5, ClientOpenFiles: 3, ClientStagedBytes: 1 << 20}) {
		t.Errorf("limits = %+v", cfg.Limits)
	}
	if cfg.Txn.TTL != 90*time.Second || cfg.Txn.MaxTTL != 2*time.Hour || cfg.EmbeddedKafka.Partitions != 6 {
		t.Errorf("txn = %v, kafka = %+v", cfg.Txn, cfg.EmbeddedKafka)
	}
	wantTLS := TLS{CertFile: "/etc/quiver/certs/server.pem", KeyFile: "/abs/server.key", ClientCAFile: "/etc/quiver/certs/ca.pem"}
	if cfg.TLS != wantTLS {
		t.Errorf("tls = %+v, want %+v", cfg.TLS, wantTLS)
	}
	if len(cfg.Auth.Tokens) != 2 || cfg.Auth.Tokens[0].Secret != "secret-a" || cfg.Auth.Tokens[1].Secret != "secret-b" ||
		strings.Join(cfg.Auth.Tokens[0].Actions, ",") != "precommit,commit,committed-epoch" {
		t.Errorf("auth = %+v", cfg.Auth)
	}
	ep := cfg.Endpoints[1]
	fc, ok := ep.Settings.(*fakeConfig)
	if ep.Name != "events" || ep.Sink != "fake" || !ok {
		t.Fatalf("endpoint = %+v", ep)
	}
	want := fakeConfig{
		fakeCommon: fakeCommon{URI: "file://./tables/events"},
		WriteMode:  "upsert", Keys: []string{"id", "region"},
		Parquet: fakeParquet{Compression: "zstd", RowGroup: 5000}, // compression keeps its default
		Timeout: 2 * time.Minute, Options: map[string]string{"region": "eu"},
	}
	if fc.URI != want.URI || fc.WriteMode != want.WriteMode || strings.Join(fc.Keys, ",") != "id,region" ||
		fc.Parquet != want.Parquet || fc.Timeout != want.Timeout || fc.Options["region"] != "eu" || ep.Settings.Mode() != "upsert" {
		t.Errorf("settings = %+v, want %+v", fc, want)
	}
	if cfg.Dir != "/etc/quiver" {
		t.Errorf("dir = %q", cfg.Dir)
	}
}

// wantProblems checks that err is a config *Error whose problems read
// exactly want, in order.
func wantProblems(t *testing.T, err error, want ...string) {
	t.Helper()
	e, ok := errors.AsType[*Error](err)
	if !ok {
		t.Fatalf("error = %v, want a *config.Error", err)
	}
	if !errors.Is(err, writers.ErrInvalid) {
		t.Errorf("error does not wrap writers.ErrInvalid")
	}
	var got []string
	for _, p := range e.Problems {
		got = append(got, p.String())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestProblems(t *testing.T) {
	t.Setenv("QUIVER_TEST_TOKEN_A", "same")
	t.Setenv("QUIVER_TEST_TOKEN_B", "same")
	t.Setenv("QUIVER_TEST_EMPTY", "")
	const ep = "endpoints: [{name: devnull, sink: discard}]\n"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"misspelled top-level key", "lisen: 127.0.0.1:1\n" + ep,
			[]string{`line 1: unknown key "lisen" (did you mean "listen"?)`}},
		{"unknown key without a near match", ep + "colour: blue\n",
			[]string{`line 2: unknown key "colour" (known keys: auth, data_dir, embedded_kafka, endpoints, flight_sql, http, http_listen, limits, listen, log, tls, tracing, txn)`}},
		{"misspelled nested key", "log:\n  level: info\n  fromat: json\n" + ep,
			[]string{`line 3: log: unknown key "fromat" (did you mean "format"?)`}},
		{"duplicate key", "listen: 127.0.0.1:1\nlisten: 127.0.0.1:2\n" + ep,
			[]string{`line 2: listen: duplicate key "listen" (first at line 1)`}},
		{"syntax error", "listen: [\n",
			[]string{`line 1: invalid YAML: did not find expected node content`}},
		{"wrong scalar type", "limits: {max_streams: many}\n" + ep,
			[]string{`line 1: limits.max_streams: expected a non-negative integer, got "many"`}},
		{"integer is not a duration", "txn: {ttl: 900}\n" + ep,
			[]string{`line 1: txn.ttl: expected a duration like 30s or 15m, got "900"`}},
		{"mapping where a scalar goes", "listen: {host: x}\n" + ep,
			[]string{`line 1: listen: expected a string, got a mapping`}},
		{"scalar where a list goes", "endpoints: devnull\n",
			[]string{`line 1: endpoints: expected a list, got "devnull"`, `line 1: endpoints: at least one endpoint is required (for example: {name: devnull, sink: discard})`}},
		{"no endpoints", "listen: 127.0.0.1:1\n",
			[]string{`endpoints: at least one endpoint is required (for example: {name: devnull, sink: discard})`}},
		{"bad endpoint names", "endpoints:\n  - {name: -x, sink: discard}\n  - {sink: discard}\n  - {name: a, sink: discard}\n  - {name: a, sink: discard}\n",
			[]string{
				`line 2: endpoints[0].name: "-x" is not a valid endpoint name: use letters, digits, '_', '.' and '-', starting with a letter or digit, at most 128 characters`,
				`line 3: endpoints[1].name: required`,
				`line 5: endpoints[3].name: "a" is already the name of endpoints[2]`,
			}},
		{"sink not in this build", "endpoints:\n  - {name: a, sink: discard}\n  - name: b\n    sink: delta\n    delta: {table_uri: file:///x}\n",
			[]string{`line 4: endpoints[1].sink: sink "delta" is not available in this build (available: discard, fake)`}},
		{"missing sink", "endpoints: [{name: a}]\n",
			[]string{`line 1: endpoints[0].sink: required (available: discard, fake)`}},
		{"section of another sink", "endpoints:\n  - name: a\n    sink: discard\n    fake: {uri: x}\n",
			[]string{`line 4: endpoints[0].fake: this section configures another sink, but the endpoint's sink is "discard": remove it or change sink`}},
		{"misspelled endpoint key", "endpoints:\n  - name: a\n    sink: fake\n    fkae: {uri: x}\n",
			[]string{`line 2: endpoints[0].fake.uri: required`, `line 4: endpoints[0]: unknown key "fkae" (did you mean "fake"?)`}},
		{"misspelled sink key", "endpoints:\n  - name: a\n    sink: fake\n    fake:\n      uri: x\n      parquet: {compresion: lz4}\n",
			[]string{`line 6: endpoints[0].fake.parquet: unknown key "compresion" (did you mean "compression"?)`}},
		{"sink validation names the key", "endpoints:\n  - name: a\n    sink: fake\n    fake:\n      uri: x\n      mode: merge\n",
			[]string{`line 6: endpoints[0].fake.mode: must be append or upsert`}},
		{"several sink problems", "endpoints:\n  - name: a\n    sink: fake\n    fake:\n      mode: upsert\n",
			[]string{`line 4: endpoints[0].fake.uri: required`, `line 4: endpoints[0].fake.merge_keys: required with mode upsert`}},
		{"maintenance of a sink without tables", "endpoints:\n  - name: a\n    sink: discard\n    maintenance: {optimize_every: 10}\n",
			[]string{`line 4: endpoints[0].maintenance: sink "discard" has no table maintenance: remove this section`}},
		{"stream section of a sink without streams", "endpoints:\n  - name: a\n    sink: discard\n    stream: {commit_interval: 1s}\n",
			[]string{`line 4: endpoints[0].stream: sink "discard" takes no continuous streams: remove this section`}},
		{"stream problems", "endpoints:\n  - name: a\n    sink: fake\n    fake: {uri: x}\n    stream:\n      commit_interval: 1ms\n      commit_bytes: 1000\n      commit_every: 3\n",
			[]string{
				`line 8: endpoints[0].stream: unknown key "commit_every" (did you mean "commit_bytes"?)`,
			}},
		{"stream values", "endpoints:\n  - name: a\n    sink: fake\n    fake: {uri: x}\n    stream:\n      commit_interval: 1ms\n      commit_bytes: 1000\n",
			[]string{
				`line 6: endpoints[0].stream.commit_interval: 1ms is out of range: use 10ms to 1h0m0s`,
				`line 7: endpoints[0].stream.commit_bytes: 1000 is below the minimum of 1048576 (1MiB)`,
			}},
		{"maintenance problems", "endpoints:\n  - name: a\n    sink: fake\n    fake: {uri: x}\n    maintenance:\n      target_file_bytes: 0\n      vacuum_retention: 1h\n      log_retention: 0s\n",
			[]string{
				`line 6: endpoints[0].maintenance.target_file_bytes: 0: must be positive (default 134217728)`,
				`line 7: endpoints[0].maintenance.vacuum_retention: 1h0m0s is below vacuum_min_retention (168h0m0s): raise it, or lower vacuum_min_retention knowing that readers of older versions lose them`,
				`line 8: endpoints[0].maintenance.log_retention: 0s: must be positive (default 720h0m0s)`,
			}},
		{"maintenance trigger", "endpoints:\n  - name: a\n    sink: fake\n    fake: {uri: x}\n    maintenance: {optimize_every: often, colour: blue}\n",
			[]string{
				`line 5: endpoints[0].maintenance.optimize_every: "often" is neither a number of commits (100) nor a positive duration (15m)`,
				`line 5: endpoints[0].maintenance: unknown key "colour" (known keys: checkpoint_interval, log_retention, optimize_every, target_file_bytes, vacuum_min_retention, vacuum_retention)`,
			}},
		{"remote listen without auth", "listen: 0.0.0.0:8815\n" + ep,
			[]string{`line 1: auth: required because listen "0.0.0.0:8815" accepts remote clients: configure auth.tokens (secrets from token_env), or listen on 127.0.0.1`}},
		{"empty host is remote", "listen: :8815\n" + ep,
			[]string{`line 1: auth: required because listen ":8815" accepts remote clients: configure auth.tokens (secrets from token_env), or listen on 127.0.0.1`}},
		{"token problems", ep + "auth:\n  tokens:\n    - {name: a, token_env: QUIVER_TEST_TOKEN_A, endpoints: [nope], actions: [comit], writers: [etl-*, \"a*b\", \"*\", \"\"]}\n" +
			"    - {name: a, token_env: QUIVER_TEST_TOKEN_B, writers: []}\n    - {name: c, token_env: QUIVER_TEST_EMPTY}\n    - {name: d}\n",
			[]string{
				`line 4: auth.tokens[0].endpoints[0]: no endpoint is called "nope" (use an endpoint name or "*")`,
				`line 4: auth.tokens[0].actions[0]: unknown action "comit" (known: begin, precommit, commit, rollback, status, committed-epoch, endpoints, health, optimize, vacuum, or "*")`,
				`line 4: auth.tokens[0].writers[1]: "a*b": use a writer name or a prefix ending in "*" ("etl-*"), at most 256 bytes`,
				`line 4: auth.tokens[0].writers[3]: "": use a writer name or a prefix ending in "*" ("etl-*"), at most 256 bytes`,
				`line 5: auth.tokens[1].name: "a" is already the name of auth.tokens[0]`,
				`line 5: auth.tokens[1].token_env: QUIVER_TEST_TOKEN_B holds the same secret as the token of auth.tokens[0]; give every token its own secret`,
				`line 5: auth.tokens[1].writers: an empty list: omit writers to allow any writer name, or list the names ("etl-*")`,
				`line 6: auth.tokens[2].token_env: environment variable QUIVER_TEST_EMPTY is not set or empty: set it to the token's secret`,
				`line 7: auth.tokens[3].token_env: required: the environment variable holding the token's secret`,
			}},
		{"auth without tokens", ep + "auth: {tokens: []}\n",
			[]string{`line 2: auth.tokens: needs at least one token (remove the auth section to disable auth, loopback listen only)`}},
		{"tls key without cert", ep + "tls: {key_file: k.pem}\n",
			[]string{`line 2: tls: cert_file and key_file go together: set both to serve TLS, or neither`}},
		{"mtls without server cert", ep + "tls: {client_ca_file: ca.pem}\n",
			[]string{`line 2: tls.client_ca_file: mutual TLS needs the server's own cert_file and key_file too`}},
		{"limits", ep + "limits: {max_message_bytes: 0, max_streams: 0, endpoint_buffer_bytes: -1}\n",
			[]string{
				`line 2: limits.max_message_bytes: must be from 1 to 1072693248 (1023 MiB), not 0`,
				`line 2: limits.max_streams: must be positive`,
				`line 2: limits.endpoint_buffer_bytes: must be at least limits.max_message_bytes (0), or one large batch could never fit`,
			}},
		// 2^62 passed once and then refused every message: twice it
		// overflows the gRPC receive limit.
		{"message limit beyond gRPC's", ep + "limits: {max_message_bytes: 4611686018427387904, endpoint_buffer_bytes: 4611686018427387904}\n",
			[]string{`line 2: limits.max_message_bytes: must be from 1 to 1072693248 (1023 MiB), not 4611686018427387904`}},
		{"message limit just above", ep + "limits: {max_message_bytes: 1072693249, endpoint_buffer_bytes: 2147483648}\n",
			[]string{`line 2: limits.max_message_bytes: must be from 1 to 1072693248 (1023 MiB), not 1072693249`}},
		{"memory limits", ep + "limits: {memory_bytes: 1000, max_open_files: 0, admission_timeout: 1ms, stream_idle_timeout: 48h}\n",
			[]string{
				`line 2: limits.memory_bytes: must be from limits.max_message_bytes (67108864) to 1125899906842624 (1 PiB), not 1000: a stream reserves one whole message before reading it`,
				`line 2: limits.max_open_files: must be from 1 to 1048576, not 0`,
				`line 2: limits.admission_timeout: must be a duration from 100ms to 24h0m0s, like 30s, not 1ms`,
				`line 2: limits.stream_idle_timeout: must be 0 (off) or a duration from 100ms to 24h0m0s, like 5m, not 48h0m0s`,
			}},
		{"buffer smaller than a message", ep + "limits:\n  endpoint_buffer_bytes: 1000\n",
			[]string{`line 3: limits.endpoint_buffer_bytes: must be at least limits.max_message_bytes (67108864), or one large batch could never fit`}},
		{"bad addresses", "listen: localhost\nhttp_listen: 127.0.0.1:99999\n" + ep,
			[]string{`line 1: listen: must be host:port like 127.0.0.1:8815, not "localhost"`, `line 2: http_listen: port "99999" must be a number from 0 to 65535`}},
		{"same address twice", "listen: 127.0.0.1:7000\nhttp_listen: 127.0.0.1:7000\n" + ep,
			[]string{`line 2: http_listen: same address as listen (127.0.0.1:7000); use another port`}},
		{"log", "log: {level: verbose, format: xml}\n" + ep,
			[]string{`line 1: log.level: must be debug, info, warn or error, not "verbose"`, `line 1: log.format: must be text or json, not "xml"`}},
		{"ttl", "txn: {ttl: 0s}\n" + ep,
			[]string{`line 1: txn.ttl: must be a duration from 1s to 168h0m0s (a week), like 15m, not 0s`}},
		{"ttl above a week", "txn: {ttl: 169h}\n" + ep,
			[]string{`line 1: txn.ttl: must be a duration from 1s to 168h0m0s (a week), like 15m, not 169h0m0s`}},
		{"ttl above max_ttl", "txn: {ttl: 2h, max_ttl: 1h}\n" + ep,
			[]string{`line 1: txn.ttl: must be at most txn.max_ttl (1h0m0s), not 2h0m0s`}},
		{"max_ttl above a week", "txn: {max_ttl: 169h}\n" + ep,
			[]string{`line 1: txn.max_ttl: must be a duration from 1s to 168h0m0s (a week), like 24h, not 169h0m0s`}},
		{"client quotas", "limits: {max_open_files: 8, client_open_files: 5, client_max_transactions: 0, client_max_streams: 0, first_message_timeout: 0s, client_staged_bytes: 0}\n" + ep,
			[]string{
				`line 1: limits.first_message_timeout: must be a duration from 100ms to 24h0m0s, like 10s, not 0s`,
				`line 1: limits.client_max_streams: must be positive, not 0`,
				`line 1: limits.client_staged_bytes: must be positive, not 0`,
				`line 1: limits.client_max_transactions: must be positive, not 0`,
				`line 1: limits.client_open_files: must be 0 (a quarter of limits.max_open_files) or from 1 to half of limits.max_open_files (4), not 5`,
			}},
		{"descriptor key file missing", "txn: {descriptor_key_file: keys/none}\n" + ep,
			[]string{`line 1: txn.descriptor_key_file: open /etc/quiver/keys/none: no such file or directory (the file holds the descriptor key in hex, at least 64 digits: openssl rand -hex 32)`}},
		{"embedded kafka", ep + "embedded_kafka:\n  enabled: true\n  partitions: 0\n",
			[]string{`line 4: embedded_kafka.partitions: must be from 1 to 1024, not 0`}},
		{"embedded kafka partitions beyond int32", ep + "embedded_kafka: {partitions: 4294967297}\n",
			[]string{`line 2: embedded_kafka.partitions: must be from 1 to 1024, not 4294967297`}},
		{"metrics auth without auth", "http: {metrics_auth: true}\n" + ep,
			[]string{`line 1: http.metrics_auth: needs an auth section: /metrics would accept the tokens of auth.tokens, and there are none`}},
		{"tracing", "tracing: {otlp_endpoint: collector, sample_ratio: 1.5, service_name: ''}\n" + ep,
			[]string{
				`line 1: tracing.otlp_endpoint: must be host:port like 127.0.0.1:8815, not "collector"`,
				`line 1: tracing.sample_ratio: must be between 0 and 1, not 1.5`,
				`line 1: tracing.service_name: must not be empty`,
			}},
		{"flight sql names", "flight_sql: {catalog: '', db_schema: 'my schema'}\n" + ep,
			[]string{
				`line 1: flight_sql.catalog: must be a letter or _ followed by up to 127 letters, digits or _, not ""`,
				`line 1: flight_sql.db_schema: must be a letter or _ followed by up to 127 letters, digits or _, not "my schema"`,
			}},
		{"empty data_dir", "data_dir: ''\n" + ep,
			[]string{`line 1: data_dir: required: the folder for the journal and local tables`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, tt.yaml)
			wantProblems(t, err, tt.want...)
		})
	}
}

func TestDescriptorKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("good.key", strings.Repeat("0f", 32)+"\n")
	write("short.key", strings.Repeat("0f", 31)+"\n")
	write("raw.key", strings.Repeat("k", 64))
	ep := "endpoints: [{name: a, sink: discard}]\n"

	cfg, err := Parse([]byte("txn: {descriptor_key_file: good.key}\n"+ep), dir, testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Txn.DescriptorKeyFile != filepath.Join(dir, "good.key") || cfg.Txn.DescriptorKey.IsZero() {
		t.Fatalf("txn = %+v, want the resolved path and its key", cfg.Txn)
	}
	for file, msg := range map[string]string{
		"short.key": "descriptor key has 31 bytes, need at least 32 (64 hex digits)",
		"raw.key":   "descriptor key is not hexadecimal",
	} {
		_, err := Parse([]byte("txn:\n  descriptor_key_file: "+file+"\n"+ep), dir, testRegistry())
		wantProblems(t, err, "line 2: txn.descriptor_key_file: "+filepath.Join(dir, file)+": "+msg+" (the file holds the descriptor key in hex, at least 64 digits: openssl rand -hex 32)")
	}
	if cfg, err := Parse([]byte(ep), dir, testRegistry()); err != nil || !cfg.Txn.DescriptorKey.IsZero() {
		t.Fatalf("no key file: %v, key set = %v", err, !cfg.Txn.DescriptorKey.IsZero())
	}
}

func TestLoadResolvesPathsAgainstTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "conf", "q.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	doc := "data_dir: ../state\ntls: {cert_file: c.pem, key_file: k.pem}\nendpoints: [{name: a, sink: discard}]\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "state"); cfg.DataDir != want {
		t.Errorf("data_dir = %q, want %q", cfg.DataDir, want)
	}
	if want := filepath.Join(dir, "conf", "c.pem"); cfg.TLS.CertFile != want {
		t.Errorf("cert_file = %q, want %q", cfg.TLS.CertFile, want)
	}
	if cfg.Dir != filepath.Join(dir, "conf") {
		t.Errorf("dir = %q", cfg.Dir)
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "q.yaml")
	if err := os.WriteFile(path, []byte("lisen: x\nlog: {level: loud}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path, testRegistry())
	want := "config " + path + ": 3 problems:\n" +
		`  line 1: unknown key "lisen" (did you mean "listen"?)` + "\n" +
		`  line 2: log.level: must be debug, info, warn or error, not "loud"` + "\n" +
		`  endpoints: at least one endpoint is required (for example: {name: devnull, sink: discard})`
	if err == nil || err.Error() != want {
		t.Errorf("error =\n%v\nwant\n%s", err, want)
	}
	_, err = Load(filepath.Join(dir, "missing.yaml"), testRegistry())
	if err == nil || !strings.Contains(err.Error(), "missing.yaml: cannot read it: open") {
		t.Errorf("missing file: %v", err)
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"listen", "listen", 0}, {"lisen", "listen", 1}, {"lsiten", "listen", 1},
		{"", "abc", 3}, {"kitten", "sitting", 3},
	}
	for _, tt := range tests {
		t.Run(tt.a+"/"+tt.b, func(t *testing.T) {
			if got := editDistance(tt.a, tt.b); got != tt.want {
				t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

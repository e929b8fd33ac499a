package server

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/quiver-ingest/quiver/server/config"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/discard"
)

// unreachable is a discard writer whose sink cannot be reached.
type unreachable struct{ *discard.Writer }

func (unreachable) Check(context.Context) error {
	return writers.Errorf(writers.ErrUnavailable, "unreachable: connection refused")
}

// withUnreachable is the build's registry plus the "unreachable" sink.
func withUnreachable() *writers.Registry {
	return writers.NewRegistry(discard.Sink(), writers.Sink{
		Name:      "unreachable",
		NewConfig: func() writers.SinkConfig { return discard.Config{} },
		New: func(writers.SinkConfig, writers.Env) (writers.Writer, error) {
			return unreachable{discard.New(nil)}, nil
		},
	})
}

const oneUnreachable = "endpoints:\n  - {name: devnull, sink: discard}\n  - {name: remote, sink: unreachable}\n"

func TestCheck(t *testing.T) {
	sinks := withUnreachable()
	cfg, err := config.Parse([]byte(oneUnreachable), t.TempDir(), sinks)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Check(t.Context(), cfg, Options{Sinks: sinks})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0] != (CheckResult{Endpoint: "devnull", Sink: "discard"}) {
		t.Fatalf("results = %+v", results)
	}
	if r := results[1]; r.Endpoint != "remote" || r.Sink != "unreachable" || !errors.Is(r.Err, writers.ErrUnavailable) {
		t.Errorf("results[1] = %+v, want the unreachable error", r)
	}
}

// TestReadyz: a server whose endpoints partly fail their probes stays in
// rotation (200), one whose every endpoint fails does not (503). Without
// a token the body is only "ready" or "not ready"; with a token of
// auth.tokens it says why, for that token's endpoints.
func TestReadyz(t *testing.T) {
	t.Setenv("QUIVER_TEST_READYZ_ALL", "all")
	t.Setenv("QUIVER_TEST_READYZ_DEVNULL", "devnull")
	const auth = `auth:
  tokens:
    - {name: all, token_env: QUIVER_TEST_READYZ_ALL, endpoints: ["*"], actions: []}
`
	const devnullToken = "    - {name: devnull, token_env: QUIVER_TEST_READYZ_DEVNULL, endpoints: [devnull], actions: []}\n"
	for _, tt := range []struct {
		name, endpoints string
		code            int
		body            map[string]string // by token ("": none)
	}{
		{"some failing", devnullToken + oneUnreachable, http.StatusOK, map[string]string{
			"":        "ready\n",
			"all":     "degraded: 1 of 2 endpoint(s) failing\n  remote: unreachable: connection refused\n",
			"devnull": "degraded: 1 of 2 endpoint(s) failing\n",
		}},
		{"all failing", "endpoints:\n  - {name: remote, sink: unreachable}\n", http.StatusServiceUnavailable, map[string]string{
			"":    "not ready\n",
			"all": "not ready: every endpoint is failing\n  remote: unreachable: connection refused\n",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sinks := withUnreachable()
			cfg, err := config.Parse([]byte("listen: 127.0.0.1:0\nhttp_listen: 127.0.0.1:0\n"+auth+tt.endpoints), t.TempDir(), sinks)
			if err != nil {
				t.Fatal(err)
			}
			s, err := New(cfg, Options{Sinks: sinks})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := s.Shutdown(context.Background()); err != nil {
					t.Error(err)
				}
			})
			for token, want := range tt.body {
				if code, body := httpGetToken(t, "http://"+s.HTTPAddr()+"/readyz", token); code != tt.code || body != want {
					t.Errorf("/readyz with token %q = %d %q, want %d %q", token, code, body, tt.code, want)
				}
			}
			// Liveness does not depend on the sinks.
			if code, _ := httpGet(t, "http://"+s.HTTPAddr()+"/healthz"); code != http.StatusOK {
				t.Errorf("/healthz = %d", code)
			}
		})
	}
}

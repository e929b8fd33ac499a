package server

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quiver-ingest/quiver/flightsvc"
	"github.com/quiver-ingest/quiver/flightsvc/groupcommit"
	"github.com/quiver-ingest/quiver/internal/redact"
	"github.com/quiver-ingest/quiver/server/config"
	"github.com/quiver-ingest/quiver/server/status"
	"github.com/quiver-ingest/quiver/writers"
)

// readyTimeout bounds the sink probes of one /readyz request.
const readyTimeout = 5 * time.Second

// newHTTPServer serves the operations endpoints:
//
//	/metrics  Prometheus, from the server's own registry
//	/healthz  liveness: 200 "ok" while the process serves HTTP at all
//	/readyz   readiness (see readyz)
//	/metrics  (with http.metrics_auth: a token of auth.tokens)
//	/         the status page; /api/status its JSON (package status; with
//	          auth: a token of auth.tokens, showing that token's endpoints)
//	/debug/pprof/  Go's profiles, with http.pprof only (with auth: a token)
func (s *Server) newHTTPServer(reg *prometheus.Registry) *http.Server {
	mux := http.NewServeMux()
	auth := tokenAuth(s.cfg.Auth)
	var metrics http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	if s.cfg.HTTP.MetricsAuth {
		metrics = requireToken(auth, metrics, "http.metrics_auth")
	}
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	page := s.board.Handler(auth)
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /assets/", page)
	mux.Handle("GET /api/status", page)
	if s.cfg.HTTP.Pprof {
		s.servePprof(mux, auth)
	}
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
}

// maxProfileSeconds bounds the CPU profiles and execution traces
// /debug/pprof/ takes: each costs the server while it runs.
const maxProfileSeconds = 60

// servePprof adds net/http/pprof's handlers. A profile shows the internals
// of every endpoint, so with auth only a token of auth.tokens granting
// every endpoint ("*") gets one.
func (s *Server) servePprof(mux *http.ServeMux, auth status.Auth) {
	guard := func(h http.HandlerFunc) http.Handler {
		if auth == nil {
			return h
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			v, ok := auth(r)
			if !ok || !v.Endpoint("*") {
				w.Header().Set("WWW-Authenticate", `Bearer realm="quiver"`)
				http.Error(w, `a bearer token of auth.tokens with endpoints ["*"] is required (http.pprof)`, http.StatusUnauthorized)
				return
			}
			h(w, r)
		})
	}
	bounded := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if sec := r.URL.Query().Get("seconds"); sec != "" {
				if n, err := strconv.Atoi(sec); err != nil || n < 1 || n > maxProfileSeconds {
					http.Error(w, fmt.Sprintf("seconds must be 1 to %d", maxProfileSeconds), http.StatusBadRequest)
					return
				}
			}
			h(w, r)
		}
	}
	mux.Handle("GET /debug/pprof/", guard(bounded(pprof.Index))) // named profiles; ?seconds= gives a delta
	mux.Handle("GET /debug/pprof/cmdline", guard(pprof.Cmdline))
	mux.Handle("GET /debug/pprof/profile", guard(bounded(pprof.Profile)))
	mux.Handle("GET /debug/pprof/symbol", guard(pprof.Symbol))
	mux.Handle("POST /debug/pprof/symbol", guard(pprof.Symbol)) // go tool pprof looks symbols up by POST
	mux.Handle("GET /debug/pprof/trace", guard(bounded(pprof.Trace)))
	if auth == nil {
		s.logger.Warn("http.pprof is on without auth: anyone who reaches http_listen can profile the server", "http_listen", s.cfg.HTTPListen)
	}
}

// readyz answers 503 when the server cannot take traffic a load balancer
// should send it: starting or shutting down, the transaction journal
// cannot write, or no endpoint passes its probe (or is degraded by
// failing writes, see package endpoint). When only some endpoints fail it
// answers 200: taking the server out of rotation would also stop the
// endpoints that serve, and clients of a failing one get its reason
// anyway.
//
// The body is "ready" or "not ready" and nothing more, unless the request
// carries a bearer token of auth.tokens: then it says why, for the
// endpoints of that token, with URIs redacted. Reasons name tables,
// paths and hosts, which an unauthenticated probe has no business
// reading (and without auth there is no token to show them to: the
// health action and the status page say why).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	ready, detail := s.readiness(r)
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	visible, ok := s.readyzViewer(r)
	switch {
	case !ok && ready:
		fmt.Fprintln(w, "ready")
	case !ok:
		fmt.Fprintln(w, "not ready")
	default:
		fmt.Fprint(w, redact.Text(detail(visible)))
	}
}

// readyzViewer is the endpoints the caller of /readyz may read reasons
// of; false when it may read none (no auth, or no valid token).
func (s *Server) readyzViewer(r *http.Request) (func(string) bool, bool) {
	auth := tokenAuth(s.cfg.Auth)
	if auth == nil {
		return nil, false
	}
	v, ok := auth(r)
	if ok && v.Endpoint == nil {
		return func(string) bool { return true }, true
	}
	return v.Endpoint, ok
}

// readiness probes the server for /readyz: whether it is ready, and the
// text saying why, for a caller who sees the endpoints visible accepts.
func (s *Server) readiness(r *http.Request) (bool, func(visible func(string) bool) string) {
	if !s.serving.Load() {
		return false, func(func(string) bool) string {
			return "not ready: the server is not serving (starting or shutting down)\n"
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	failing := map[string]error{}
	for name, err := range s.svc.Health(ctx) {
		if err != nil {
			failing[name] = err
		}
	}
	jerr := s.coord.JournalHealth()
	ready := jerr == nil && (len(failing) == 0 || len(failing) < len(s.endpoints))
	return ready, func(visible func(string) bool) string {
		var b strings.Builder
		switch {
		case jerr != nil:
			fmt.Fprintf(&b, "not ready: the transaction journal cannot write: %v\n", jerr)
		case !ready:
			b.WriteString("not ready: every endpoint is failing\n")
		case len(failing) > 0:
			fmt.Fprintf(&b, "degraded: %d of %d endpoint(s) failing\n", len(failing), len(s.endpoints))
		default:
			b.WriteString("ready\n")
		}
		var lines []string
		for name, err := range failing {
			if visible(name) {
				lines = append(lines, fmt.Sprintf("  %s: %v\n", name, err))
			}
		}
		slices.Sort(lines)
		for _, l := range lines {
			b.WriteString(l)
		}
		return b.String()
	}
}

// newBoard builds the status page's board from the server's parts.
// continuousStreams is the status page's view of an endpoint's streams.
func continuousStreams(ss []groupcommit.StreamStatus) []status.ContinuousStream {
	seq := func(v int64) *int64 {
		if v == groupcommit.NoSeq {
			return nil
		}
		return &v
	}
	out := make([]status.ContinuousStream, len(ss))
	for i, st := range ss {
		out[i] = status.ContinuousStream{Writer: st.Writer, DurableSeq: seq(st.DurableSeq), LastSeq: seq(st.LastSeq), LagSeconds: st.Lag.Seconds()}
	}
	return out
}

func (s *Server) newBoard() *status.Board {
	eps := make([]status.Endpoint, len(s.endpoints))
	for i, e := range s.endpoints {
		eps[i] = status.Endpoint{
			Name: e.Name, Sink: e.Sink, Mode: e.Mode,
			Target:   writers.TargetOf(s.cfg.Endpoints[i].Settings),
			Reason:   s.handles[i].Problem,
			Recorder: s.recorders[i],
		}
		if s.svc.TakesStreams(e.Name) {
			eps[i].Continuous = func() []status.ContinuousStream { return continuousStreams(s.svc.ContinuousStreams(e.Name)) }
		}
	}
	security := "plaintext"
	if s.tls != nil {
		security = "tls"
		if s.tls.ClientCAs != nil {
			security = "mutual tls"
		}
	}
	return status.New(status.Options{
		Version:      s.opts.Version,
		Flight:       fmt.Sprintf("%s (%s)", s.FlightAddr(), security),
		Started:      s.started,
		Endpoints:    eps,
		Gatherer:     s.reg,
		Transactions: s.coord.Live,
		Journal:      s.coord.JournalHealth,
		Serving:      s.serving.Load,
		SampleEvery:  s.opts.StatusSampleEvery,
		StuckAfter:   s.opts.StatusStuckAfter,
	})
}

// tokenAuth accepts the requests whose bearer token is one of auth.tokens
// and shows them that token's endpoints and transactions (all of them to
// an admin token, flightsvc.Token.Caller); nil without auth.
func tokenAuth(a *config.Auth) status.Auth {
	if a == nil {
		return nil
	}
	return func(r *http.Request) (status.View, bool) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			return status.View{}, false
		}
		for _, t := range a.Tokens {
			if subtle.ConstantTimeCompare([]byte(got), []byte(t.Secret)) == 1 {
				caller := (&flightsvc.Token{Name: t.Name, Endpoints: t.Endpoints, Actions: t.Actions}).Caller()
				return status.View{
					Endpoint: func(ep string) bool {
						return slices.Contains(t.Endpoints, "*") || slices.Contains(t.Endpoints, ep)
					},
					Txn: caller.Sees,
				}, true
			}
		}
		return status.View{}, false
	}
}

// requireToken lets through only requests auth accepts; setting names the
// configuration that asked for the token.
func requireToken(auth status.Auth, h http.Handler, setting string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := auth(r); !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="quiver"`)
			http.Error(w, "a bearer token of auth.tokens is required ("+setting+")", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

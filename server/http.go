package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyTimeout bounds the sink probes of one /readyz request.
const readyTimeout = 5 * time.Second

// newHTTPServer serves the operations endpoints:
//
//	/metrics  Prometheus, from the server's own registry
//	/healthz  liveness: 200 "ok" while the process serves HTTP at all
//	/readyz   readiness (see readyz)
//	/         a plain-text status page
func (s *Server) newHTTPServer(reg *prometheus.Registry) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /{$}", s.statusPage)
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
}

// readyz answers 503 when the server cannot take traffic a load balancer
// should send it: starting or shutting down, the transaction journal
// cannot write, or no endpoint passes its probe. When only some endpoints
// fail it answers 200 with a "degraded" body naming them and their
// reasons: taking the server out of rotation would also stop the
// endpoints that serve, and clients of a failing one get its reason
// (Unavailable or FailedPrecondition) anyway.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !s.serving.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready: the server is not serving (starting or shutting down)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	var failing []string
	for name, err := range s.svc.Health(ctx) {
		if err != nil {
			failing = append(failing, fmt.Sprintf("  %s: %v", name, err))
		}
	}
	slices.Sort(failing)
	detail := strings.Join(failing, "\n")
	switch jerr := s.coord.JournalHealth(); {
	case jerr != nil:
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: the transaction journal cannot write: %v\n", jerr)
	case len(failing) > 0 && len(failing) == len(s.endpoints):
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: every endpoint is failing\n")
	case len(failing) > 0:
		fmt.Fprintf(w, "degraded: %d of %d endpoint(s) failing\n", len(failing), len(s.endpoints))
	default:
		fmt.Fprintln(w, "ready")
		return
	}
	if detail != "" {
		fmt.Fprintln(w, detail)
	}
}

func (s *Server) statusPage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	state := "serving"
	if !s.serving.Load() {
		state = "shutting down"
	}
	security := "plaintext"
	if s.tls != nil {
		security = "tls"
		if s.tls.ClientCAs != nil {
			security = "mutual tls"
		}
	}
	authn := "none (loopback only)"
	if s.cfg.Auth != nil {
		authn = fmt.Sprintf("%d bearer token(s)", len(s.cfg.Auth.Tokens))
	}
	fmt.Fprintf(w, "quiver %s\n\n", s.opts.Version)
	fmt.Fprintf(w, "state              %s\n", state)
	fmt.Fprintf(w, "flight             %s (%s)\n", s.FlightAddr(), security)
	fmt.Fprintf(w, "auth               %s\n", authn)
	journal := "ok"
	if err := s.coord.JournalHealth(); err != nil {
		journal = err.Error()
	}
	fmt.Fprintf(w, "open transactions  %d\n", s.coord.OpenTransactions())
	fmt.Fprintf(w, "journal            %s\n\n", journal)
	fmt.Fprintf(w, "endpoints (%d)\n", len(s.endpoints))
	for i, e := range s.endpoints {
		up := "up"
		if !s.handles[i].Up() {
			up = "unavailable"
		}
		fmt.Fprintf(w, "  %-24s %-8s %-12s %s\n", e.Name, e.Sink, e.Mode, up)
	}
}

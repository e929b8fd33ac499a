// Package srfake is an in-process Confluent Schema Registry for tests: an
// httptest server speaking the subset of the REST API the Kafka sink and
// its readers use (POST /subjects/{s}/versions, GET /schemas/ids/{id},
// GET /schemas/ids/{id}/schema, PUT and GET /config/{s},
// GET /subjects/{s}/versions/latest, GET /subjects). Identical schema
// texts share an id, as in the real registry. It checks no
// compatibility; Reject makes the next registrations fail with 409.
package srfake

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Server is a running fake registry. All methods are safe for concurrent
// use.
type Server struct {
	*httptest.Server

	mu       sync.Mutex // guards the following fields
	byText   map[string]int
	texts    []string          // id-1 → text
	subjects map[string][]int  // subject → ids by version
	compat   map[string]string // subject → level
	reject   bool
}

// Start starts a registry on 127.0.0.1:0, closed at the test's end.
func Start(t testing.TB) *Server {
	s := New()
	t.Cleanup(s.Close)
	return s
}

// New starts a registry on 127.0.0.1:0 outside a test (benchmarks); the
// caller closes it.
func New() *Server {
	s := &Server{byText: map[string]int{}, subjects: map[string][]int{}, compat: map[string]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Reject makes registrations fail with 409 (incompatible) while on.
func (s *Server) Reject(on bool) {
	s.mu.Lock()
	s.reject = on
	s.mu.Unlock()
}

// Compatibility returns the level set on subject, "" if none.
func (s *Server) Compatibility(subject string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.compat[subject]
}

// Versions returns the ids registered under subject, by version.
func (s *Server) Versions(subject string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.subjects[subject])
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code, errCode int, msg string) {
	reply(w, code, map[string]any{"error_code": errCode, "message": msg})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "subjects" && parts[2] == "versions":
		var body struct {
			Schema string `json:"schema"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Schema == "" {
			fail(w, http.StatusUnprocessableEntity, 42201, "invalid schema")
			return
		}
		if s.reject {
			fail(w, http.StatusConflict, 409, "schema being registered is incompatible with an earlier schema")
			return
		}
		id, ok := s.byText[body.Schema]
		if !ok {
			s.texts = append(s.texts, body.Schema)
			id = len(s.texts)
			s.byText[body.Schema] = id
		}
		if !slices.Contains(s.subjects[parts[1]], id) {
			s.subjects[parts[1]] = append(s.subjects[parts[1]], id)
		}
		reply(w, http.StatusOK, map[string]any{"id": id})
	case r.Method == http.MethodGet && len(parts) >= 3 && parts[0] == "schemas" && parts[1] == "ids":
		id, err := strconv.Atoi(parts[2])
		if err != nil || id < 1 || id > len(s.texts) {
			fail(w, http.StatusNotFound, 40403, "schema not found")
			return
		}
		if len(parts) == 4 && parts[3] == "schema" {
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(s.texts[id-1]))
			return
		}
		reply(w, http.StatusOK, map[string]any{"schema": s.texts[id-1]})
	case len(parts) == 2 && parts[0] == "config":
		if r.Method == http.MethodPut {
			var body struct {
				Compatibility string `json:"compatibility"`
			}
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				fail(w, http.StatusUnprocessableEntity, 42203, "invalid compatibility level")
				return
			}
			s.compat[parts[1]] = body.Compatibility
		}
		reply(w, http.StatusOK, map[string]any{"compatibilityLevel": s.compat[parts[1]]})
	case r.Method == http.MethodGet && len(parts) == 4 && parts[0] == "subjects" && parts[3] == "latest":
		ids := s.subjects[parts[1]]
		if len(ids) == 0 {
			fail(w, http.StatusNotFound, 40401, "subject not found")
			return
		}
		id := ids[len(ids)-1]
		reply(w, http.StatusOK, map[string]any{"subject": parts[1], "version": len(ids), "id": id, "schema": s.texts[id-1]})
	case r.Method == http.MethodGet && len(parts) == 1 && parts[0] == "subjects":
		names := make([]string, 0, len(s.subjects))
		for n := range s.subjects {
			names = append(names, n)
		}
		slices.Sort(names)
		reply(w, http.StatusOK, names)
	default:
		fail(w, http.StatusNotFound, 404, "not found: "+r.Method+" "+r.URL.Path)
	}
}

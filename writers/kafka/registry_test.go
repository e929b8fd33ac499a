package kafka

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quiver-ingest/quiver/internal/alloccheck"
	"github.com/quiver-ingest/quiver/writers/kafka/kafkaenc"
)

// TestRegistryAnswersBounded: the Schema Registry is another process. An
// answer of 64 MiB (the sr client reads answers whole) fails after 1 MiB,
// and a schema id the 4-byte record header cannot carry, or 0, is refused
// instead of framing records with a wrong id.
func TestRegistryAnswersBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		switch {
		case strings.Contains(r.URL.Path, "huge"):
			w.Write([]byte(`{"id":1,"pad":"`))
			chunk := []byte(strings.Repeat("x", 1<<20))
			for range 64 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case strings.Contains(r.URL.Path, "zero"):
			w.Write([]byte(`{"id":0}`))
		default:
			w.Write([]byte(`{"id":4294967297}`))
		}
	}))
	t.Cleanup(srv.Close)
	cfg := &Config{SchemaRegistry: SchemaRegistry{URL: srv.URL}}
	opts, err := cfg.registryOpts()
	if err != nil {
		t.Fatal(err)
	}
	for subject, want := range map[string]string{"huge-value": "more than 1048576 bytes", "zero-value": "schema id 0", "wide-value": "schema id 4294967297"} {
		reg, err := kafkaenc.NewRegistry(subject, opts...)
		if err != nil {
			t.Fatal(err)
		}
		alloccheck.Below(t, subject, func() { _, err = reg.Register(t.Context(), `"string"`) })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error mentioning %q", subject, err, want)
		}
	}
}

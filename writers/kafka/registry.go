package kafka

import (
	"errors"
	"net/http"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/quiver-ingest/quiver/writers"
)

// registryError classifies a Schema Registry failure: a rejected schema
// (4xx: incompatible, invalid) is ErrInvalid, missing credentials are the
// auth classes, anything else (5xx, unreachable) is ErrUnavailable.
func registryError(err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		switch {
		case re.StatusCode == http.StatusUnauthorized:
			return writers.Errorf(writers.ErrUnauthenticated, "kafka: schema registry: %w (check the registry's credentials)", err)
		case re.StatusCode == http.StatusForbidden:
			return writers.Errorf(writers.ErrPermissionDenied, "kafka: schema registry: %w", err)
		case re.StatusCode >= 400 && re.StatusCode < 500:
			return writers.Errorf(writers.ErrInvalid, "kafka: schema registry refused the schema: %w (fix the schema or the subject's compatibility level)", err)
		}
	}
	return writers.Errorf(writers.ErrUnavailable, "kafka: schema registry unreachable: %w (check schema_registry.url)", err)
}

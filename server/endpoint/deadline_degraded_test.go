package endpoint

import (
	"context"
	"fmt"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
)

// TestClientDeadlineIsNotTheSinksFault: a storage call cut off by the
// caller's own deadline (a gRPC client's grpc-timeout; storage classifies
// it ErrUnavailable, keeping the context error) is the caller's doing,
// like a cancellation. Counted, three puts with a tiny deadline from any
// client degrade the endpoint, and with a single endpoint /readyz turns
// 503 (see server's TestDegradedOnlyEndpointRecoversWithoutTraffic).
func TestClientDeadlineIsNotTheSinksFault(t *testing.T) {
	err := fmt.Errorf("storage put x: %w: %w", writers.ErrUnavailable, context.DeadlineExceeded)
	if sinkFault(err) {
		t.Fatalf("sinkFault(%v) = true: a client's deadline counts toward degraded", err)
	}
}

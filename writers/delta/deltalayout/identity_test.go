package deltalayout

import (
	"errors"
	"math"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// TestIdentityOverflow: values past the range of a long are refused, not
// wrapped.
func TestIdentityOverflow(t *testing.T) {
	var a IdentityAllocator
	id := deltalog.Identity{Start: 1, Step: 1 << 62, HighWaterMark: math.MaxInt64 - 10, Assigned: true}
	if _, err := a.take("id", id, 1); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("take past MaxInt64: %v, want ErrInvalid", err)
	}
	id = deltalog.Identity{Start: 1, Step: -3, HighWaterMark: math.MinInt64 + 5, Assigned: true}
	if _, err := a.take("id", id, 2); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("take past MinInt64: %v, want ErrInvalid", err)
	}
	id = deltalog.Identity{Start: 1, Step: 2}
	if first, err := a.take("ok", id, 3); err != nil || first != 1 {
		t.Fatalf("take: %d, %v", first, err)
	}
	if first, err := a.take("ok", id, 1); err != nil || first != 7 {
		t.Fatalf("take after 1, 3, 5: %d, %v, want 7", first, err)
	}
}

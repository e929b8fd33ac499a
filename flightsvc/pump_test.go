package flightsvc

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quiver-ingest/quiver/internal/membudget"
)

// releaseQueued runs from an ack timer too, possibly after the receiver
// closed the queue: it releases what is left and returns, where reading
// a closed queue's zero values would release a nil batch forever.
func TestReleaseQueuedOfAClosedQueue(t *testing.T) {
	budget := smallBudget(t)
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	share := budget.Share("events", 0)
	ps := &putStream{ep: &endpoint{m: m.forEndpoint("events")}, guard: &recvGuard{acct: share.Account(nil)}}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	queue := make(chan queued, 1)
	b := array.NewRecordBuilder(mem, HostileSchema())
	b.Field(0).(*array.Int64Builder).Append(1)
	b.Field(1).(*array.StringBuilder).Append("one")
	rec := b.NewRecordBatch()
	b.Release()
	share.Account(nil).Charge(membudget.Decoded, 100)
	queue <- queued{rec: rec, size: 100, held: 100}
	close(queue)
	done := make(chan struct{})
	go func() {
		defer close(done)
		releaseQueued(ps, queue)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("releaseQueued of a closed queue did not return")
	}
	if n := budget.Used(membudget.Decoded); n != 0 {
		t.Fatalf("%d bytes still charged", n)
	}
}

// smallBudget is a 1 MiB memory budget of a few file slots.
func smallBudget(t *testing.T) *membudget.Budget {
	t.Helper()
	budget, err := membudget.New(membudget.Options{Limit: 1 << 20, MaxOpenFiles: 4, AdmissionTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return budget
}

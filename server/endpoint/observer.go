package endpoint

import (
	"time"

	"github.com/quiver-ingest/quiver/writers"
)

// tracerName names the sink commit spans' instrumentation scope.
const tracerName = "github.com/quiver-ingest/quiver/server/endpoint"

// Observer learns what an endpoint's sink did (the status page keeps
// it). Its methods are called from the calls' goroutines, concurrently;
// they must be quick and must not block.
type Observer interface {
	// Committed: a sink commit succeeded.
	Committed(Commit)
	// Failed: a sink call failed; op is open, write, precommit or commit.
	Failed(op string, err error)
}

// Commit is one successful sink commit.
type Commit struct {
	Key  writers.TxnKey
	Info writers.CommitInfo
	// Rows written under Key through this Writer (0 for a transaction
	// staged before a restart).
	Rows int64
	// At is when the commit started; Took how long it ran.
	At   time.Time
	Took time.Duration
}

type nopObserver struct{}

func (nopObserver) Committed(Commit)     {}
func (nopObserver) Failed(string, error) {}

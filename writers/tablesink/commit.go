package tablesink

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quiver-ingest/quiver/writers"
)

// Result is how a commit attempt ended, for the commits counter.
type Result int

const (
	// Uncounted: nothing to publish and no epoch to record.
	Uncounted Result = iota
	Committed
	Replayed
)

// Commit is one sink Commit call's loop.
type Commit struct {
	Sink     string // names the sink in logs
	Endpoint string
	Key      writers.TxnKey
	// MaxReplans bounds how often a conflict the format could not rebase
	// is planned again.
	MaxReplans int
	// Commits counts ended calls by result: committed, replayed, failed.
	Commits *prometheus.CounterVec
	// Conflicts counts every conflict (planned again or not); Replans,
	// when set, those planned again.
	Conflicts, Replans prometheus.Counter
	Log                *slog.Logger
}

// finalError is an error that ends the loop even when it is a conflict.
type finalError struct{ err error }

func (e finalError) Error() string { return e.err.Error() }
func (e finalError) Unwrap() error { return e.err }

// Final marks err as ending the commit even when it is a conflict: one
// the attempt must not plan again (a plan made against data that has
// moved on). Loop returns err itself.
func Final(err error) error { return finalError{err} }

// Loop runs attempt (replan counts from 0) until it ends the commit. An
// attempt reads the latest table, answers a key whose epoch the table
// already records as Replayed, plans and publishes. A writers.ErrConflict
// is planned again up to MaxReplans times (unless Final); an error whose
// outcome is unknown (writers.ErrOutcomeUnknown) becomes a
// writers.OutcomeUnknownError naming the endpoint and key; any other
// error ends the call. Every call but an Uncounted one counts in Commits.
func (c Commit) Loop(ctx context.Context, attempt func(ctx context.Context, replan int) (writers.CommitInfo, Result, error)) (writers.CommitInfo, error) {
	for replan := 0; ; replan++ {
		info, res, err := attempt(ctx, replan)
		var final finalError
		isFinal := errors.As(err, &final)
		if isFinal {
			err = final.err
		}
		switch {
		case err == nil:
			switch res {
			case Committed:
				c.Commits.WithLabelValues("committed").Inc()
			case Replayed:
				c.Commits.WithLabelValues("replayed").Inc()
			}
			return info, nil
		case errors.Is(err, writers.ErrConflict) && !isFinal && replan < c.MaxReplans:
			c.Conflicts.Inc()
			if c.Replans != nil {
				c.Replans.Inc()
			}
			c.Log.Debug(c.Sink+" commit conflict, planning again", "key", c.Key.String(), "err", err)
			continue
		case errors.Is(err, writers.ErrConflict):
			c.Conflicts.Inc()
		case errors.Is(err, writers.ErrOutcomeUnknown):
			err = &writers.OutcomeUnknownError{Endpoint: c.Endpoint, Key: c.Key, Err: err}
		}
		c.Commits.WithLabelValues("failed").Inc()
		return writers.CommitInfo{}, err
	}
}

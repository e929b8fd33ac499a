// Package txn is the transaction coordinator: the state machine of
// (writer, epoch) transactions, its durable journal under data_dir, recovery
// after a restart and expiry of abandoned transactions.
//
// THIS FILE IS THE AGREED API SKELETON. The implementation replaces the
// bodies; signatures and documented behaviour are what flightsvc and server
// are written against. Change them only together with those callers.
package txn

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quiver-ingest/quiver/writers"
)

// State is a transaction's state.
type State string

const (
	StateOpen         State = "open"
	StatePrecommitted State = "precommitted"
	StateCommitted    State = "committed"
	StateAborted      State = "aborted"
)

// Endpoints finds the writer of an endpoint by name.
type Endpoints interface {
	Writer(endpoint string) (writers.Writer, bool)
}

// Options configure a Coordinator. Zero values are documented per field.
type Options struct {
	// Dir holds the journal; created if missing. Required.
	Dir string
	// TTL is the default lifetime of a transaction without activity before
	// it is rolled back (open or precommitted). Zero means 15 minutes.
	TTL time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
	// Registerer for the coordinator's metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Participant is one endpoint taking part in a transaction.
type Participant struct {
	Endpoint string
	// Rows staged by finished streams.
	Rows int64
	// Descriptor is set once precommitted.
	Descriptor writers.Descriptor
	// Version is the sink's table version once committed (or
	// writers.NoVersion).
	Version int64
}

// Status describes a transaction.
type Status struct {
	Writer       string
	Epoch        int64
	State        State
	Participants []Participant
	// Replayed: the epoch was already committed before this call; the call
	// changed nothing.
	Replayed bool
	// Deadline is when the transaction expires (open/precommitted only).
	Deadline time.Time
}

// Stream is one transactional DoPut stream joined to a transaction.
type Stream struct{}

// Replayed reports that the stream's epoch is at or below the last epoch the
// writer committed on the endpoint: the caller must read and acknowledge
// the stream's batches without writing them.
func (s *Stream) Replayed() bool { panic("unimplemented") }

// Key is the transaction key to pass to writers.Writer.Write.
func (s *Stream) Key() writers.TxnKey { panic("unimplemented") }

// Done ends the stream. rows is the number of rows written. A non-nil err
// means the stream failed part-way: its rows may be partly staged, so the
// transaction is poisoned (precommit fails with ErrWrongState telling the
// client to roll back and replay the epoch). Done is idempotent.
func (s *Stream) Done(rows int64, err error) { panic("unimplemented") }

// Coordinator runs transactions. All methods are safe for concurrent use.
type Coordinator struct{}

// Open replays the journal in opts.Dir and returns a running coordinator:
// decided commits are finished (calling Commit on the sinks again, which is
// idempotent), precommitted transactions stay precommitted, open ones are
// aborted. A torn journal tail is truncated with a warning; corruption
// elsewhere returns a *CorruptionError naming file and offset. Open starts
// the expiry goroutine, stopped by Close.
func Open(ctx context.Context, opts Options, eps Endpoints) (*Coordinator, error) {
	panic("unimplemented")
}

// Close stops background work and closes the journal. Idempotent.
func (c *Coordinator) Close() error { panic("unimplemented") }

// Begin opens transaction (writer, epoch), journaled before it returns.
// Beginning an existing open transaction returns it (ttl refreshed). A
// newer epoch fences (aborts) older open transactions of the same writer;
// beginning an epoch older than an open or precommitted epoch of the writer
// is ErrWrongState. ttl <= 0 means the default. Epochs below 0 and empty
// writers are ErrInvalid.
func (c *Coordinator) Begin(ctx context.Context, writer string, epoch int64, ttl time.Duration) (Status, error) {
	panic("unimplemented")
}

// Join attaches a transactional DoPut stream to (writer, epoch) on endpoint,
// beginning the transaction if needed. If the epoch is at or below the last
// epoch the writer committed on endpoint (asked of the sink through
// CommittedEpoch and cached), the returned stream is Replayed. A
// precommitted, committed or aborted transaction is ErrWrongState; an
// unknown endpoint ErrNotFound. The caller must call Done.
func (c *Coordinator) Join(ctx context.Context, writer string, epoch int64, endpoint string) (*Stream, error) {
	panic("unimplemented")
}

// Precommit asks every participant to make its staged data durable and
// returns their descriptors; journaled before it returns. Precommit of a
// precommitted transaction returns the same result. While a stream is
// still writing, or after a stream failed, it is ErrWrongState. For an
// epoch at or below the writer's last committed epoch (unknown to the
// journal) it answers precommitted with Replayed and no participants.
func (c *Coordinator) Precommit(ctx context.Context, writer string, epoch int64) (Status, error) {
	panic("unimplemented")
}

// Commit decides the commit (journaled), then commits every participant,
// adding the descriptors handed over from other servers (endpoint →
// descriptors); handed descriptors may name endpoints this server's
// transaction has no participant for, or a transaction this server never
// saw. Idempotent: committing a committed transaction returns the same
// result; an epoch already committed in the sinks answers Replayed. Commit
// of an open transaction is ErrWrongState. When a sink commit fails the
// decision stays journaled and a later Commit (or a restart) retries it.
func (c *Coordinator) Commit(ctx context.Context, writer string, epoch int64, handed map[string][]writers.Descriptor) (Status, error) {
	panic("unimplemented")
}

// Rollback aborts an open or precommitted transaction and discards its
// staged data. Idempotent; rolling back a committed transaction is
// ErrWrongState; an unknown transaction answers aborted.
func (c *Coordinator) Rollback(ctx context.Context, writer string, epoch int64) (Status, error) {
	panic("unimplemented")
}

// Status reports a transaction; unknown ones are ErrNotFound.
func (c *Coordinator) Status(ctx context.Context, writer string, epoch int64) (Status, error) {
	panic("unimplemented")
}

// CommittedEpoch asks endpoint's sink for writer's last committed epoch.
func (c *Coordinator) CommittedEpoch(ctx context.Context, endpoint, writer string) (int64, bool, error) {
	panic("unimplemented")
}

// OpenTransactions returns the number of open and precommitted
// transactions (for metrics and health).
func (c *Coordinator) OpenTransactions() int { panic("unimplemented") }

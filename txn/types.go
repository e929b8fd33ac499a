package txn

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/quiver-ingest/quiver/txn/journal"
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

// Endpoints finds the writer of an endpoint by name. It is called
// concurrently and must not block.
type Endpoints interface {
	Writer(endpoint string) (writers.Writer, bool)
}

// Options configure a Coordinator. Zero values are documented per field.
type Options struct {
	// Dir holds the journal; created if missing. Required. Only one
	// coordinator may use a Dir at a time (it is locked).
	Dir string
	// TTL is the default lifetime of a transaction without activity before
	// it is rolled back (open or precommitted). Zero means 15 minutes; at
	// most MaxTTL.
	TTL time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
	// Registerer for the coordinator's and the journal's metrics; nil
	// registers nothing. They are unregistered by Close.
	Registerer prometheus.Registerer
	// Now is the clock of deadlines and journal timestamps; nil means
	// time.Now.
	Now func() time.Time
	// TracerProvider makes the spans of precommit and commit; nil makes
	// none.
	TracerProvider trace.TracerProvider
	// DiscardPrecommitted says that no other server can commit this
	// server's descriptors (its descriptor key is its own, not shared by
	// txn.descriptor_key_file): rolling back, fencing or expiring a
	// precommitted attempt then deletes the files its precommit wrote
	// (writers.PrecommitDiscarder). Otherwise they are left to vacuum.
	DiscardPrecommitted bool
	// ReplayCheck is what a commit does when replays of a committed epoch
	// sent other row counts than it published (replaycheck.go); "" means
	// ReplayWarn.
	ReplayCheck ReplayCheck
	// MaxTTLOfBegin caps the ttl a begin may ask for (txn.max_ttl): more
	// is ErrInvalid naming txn.max_ttl. Zero means MaxTTL; at most MaxTTL.
	MaxTTLOfBegin time.Duration
	// MaxOpenPerOwner bounds the open and precommitted transactions of
	// one owner (Caller.Owner, a token; admins are exempt), so that one
	// cannot hold every transaction slot: beginning one more is
	// ErrExhausted naming limits.client_max_transactions. Zero means no
	// bound.
	MaxOpenPerOwner int
	// MaxStagedPerOwner bounds the bytes one owner's open and
	// precommitted transactions were written (Stream.Stage; admins are
	// exempt): a batch beyond is ErrExhausted naming
	// limits.client_staged_bytes. Zero means no bound. The count starts
	// from zero at a restart.
	MaxStagedPerOwner int64
	// OneEpoch reports the writers whose only epoch is 0 (Flight SQL
	// transactions, each under a writer named for it): other epochs of
	// theirs are not created (begin, join and a commit of handed
	// descriptors refuse them), and a decided commit of theirs that every
	// endpoint refuses is undone owing no replay, as nothing could commit
	// before it. Nil means none.
	OneEpoch func(writer string) bool
}

// DefaultTTL is the TTL when Options.TTL is zero.
const DefaultTTL = 15 * time.Minute

// Limits of what a transaction may be named and how long it may live
// (docs/transactions.md). Writer names are journaled with every record of a
// transaction and kept for the life of the process, so they are bounded.
const (
	// MaxWriterBytes is the longest writer name, in bytes.
	MaxWriterBytes = 256
	// MaxTTL is the longest TTL of a transaction (Options.TTL, Begin's
	// ttl): a week; an abandoned transaction holds staged data that long.
	MaxTTL = 7 * 24 * time.Hour
)

// Participant is one endpoint taking part in a transaction.
type Participant struct {
	Endpoint string
	// Rows staged by finished streams.
	Rows int64
	// Descriptor is set once precommitted (this server's own descriptor).
	Descriptor writers.Descriptor
	// Version is the sink's table version once committed (or
	// writers.NoVersion).
	Version int64
}

// Status describes a transaction.
type Status struct {
	Writer string
	Epoch  int64
	State  State
	// Attempt is the current attempt's id ("" for a replay answered
	// without one, or a transaction begun before attempts existed).
	Attempt      string
	Participants []Participant
	// Replayed: the epoch was already committed before this call; the call
	// changed nothing.
	Replayed bool
	// Deadline is when the transaction expires (open/precommitted only).
	Deadline time.Time
	// Since is when an open transaction was begun, or a precommitted one
	// precommitted (open/precommitted only).
	Since time.Time
	// Owner is the caller that began it (Caller.Owner); "" none.
	Owner string
}

// CorruptionError is returned by Open when the journal is corrupt: it
// names the segment file and the byte offset.
type CorruptionError = journal.CorruptionError

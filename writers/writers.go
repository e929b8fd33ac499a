// Package writers defines the contract between the Flight service, the
// transaction coordinator and the sinks that land rows somewhere: the Writer
// interface, its optional capabilities, the error classes every sink returns
// and the registry through which sink packages plug into the server.
//
// Sinks live in sub-packages (writers/discard, later writers/delta,
// writers/kafka, writers/lance). This package must not import any of them,
// nor gRPC: flightsvc maps the error classes to status codes.
//
// A sink implements Writer. It may also implement:
//   - SchemaReporter: the endpoint's current schema, for GetSchema and for
//     rejecting mismatched streams before any row is staged.
//   - SchemaChecker: its own admission rule for a stream's schema, for sinks
//     that absorb differences from the reported schema (another string or
//     timestamp encoding, new columns under schema evolution).
//
// Capabilities are detected in one place each: [SchemaOf] and
// [CheckStreamSchema].
package writers

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// TxnKey names the transaction a write belongs to.
//
// Transactional writes carry the client's (Writer, Epoch). Auto-commit
// streams use a private key made by [AutoKey]: Auto is true, Writer is a
// server-generated stream id and Epoch is 0. Sinks must not record
// auto-commit keys as committed epochs (no Delta txn action, no Lance
// writer/epoch property, no Kafka marker).
type TxnKey struct {
	Writer string
	Epoch  int64
	Auto   bool
}

// AutoKey returns the private key of one auto-commit stream.
func AutoKey(streamID string) TxnKey { return TxnKey{Writer: streamID, Auto: true} }

func (k TxnKey) String() string {
	if k.Auto {
		return "auto:" + k.Writer
	}
	return fmt.Sprintf("%s@%d", k.Writer, k.Epoch)
}

// Descriptor is the opaque, self-contained result of Precommit: everything
// Commit needs to publish the staged data, even on another server or after a
// restart (for Delta, the Add actions of files already written; for Kafka,
// the location of the staged record file). It travels base64-encoded in the
// precommit and commit actions and is kept in the coordinator's journal.
type Descriptor []byte

// CommitInfo is what a Commit reports.
type CommitInfo struct {
	// Version is the table version the commit produced (Delta, Lance), or
	// -1 when the sink has no versions.
	Version int64
	// Replayed is true when the key was already committed and the call
	// changed nothing.
	Replayed bool
}

// NoVersion is CommitInfo.Version for sinks without table versions.
const NoVersion int64 = -1

// Contract describes what a sink guarantees.
type Contract struct {
	// Delivery is "exactly-once" or "at-least-once".
	Delivery string
	// Modes lists the write modes the sink offers (append, overwrite, ...).
	Modes []string
	// AggregatesDescriptors is true when Commit can publish descriptors
	// precommitted by other servers in one sink commit.
	AggregatesDescriptors bool
	// Rewrites is true when Commit rewrites or marks rows the transaction
	// read (upsert, merge_insert), so that a concurrent commit can refuse
	// it for good (ErrConflict): such endpoints of a transaction commit
	// before its others.
	Rewrites bool
}

// Writer lands rows in one endpoint's sink.
//
// Concurrency: Write for one key is never called concurrently with itself or
// with Precommit/Rollback of the same key; calls for different keys may run
// concurrently. Commit, Rollback and CommittedEpoch may be called from any
// goroutine.
//
// Records passed to Write are borrowed: valid only for the call. A writer
// that keeps one (a buffer, a queue, a goroutine) must Retain it and Release
// it exactly once later, on every path.
//
// Errors wrap one of the classes of this package (ErrInvalid,
// ErrUnavailable, ErrConflict, ...) so that the caller can map them; an
// unclassified error is treated as internal.
type Writer interface {
	// Open prepares the writer (connect, read table state). It is called
	// once before any other method except Check.
	Open(ctx context.Context) error
	// Close releases resources. Staged, uncommitted data of open keys is
	// discarded. Close is idempotent.
	Close(ctx context.Context) error

	// Write stages rows for key. Staged rows are invisible to readers until
	// Commit. Write may block to apply backpressure; it returns when ctx ends.
	Write(ctx context.Context, key TxnKey, rec arrow.RecordBatch) error
	// Precommit makes everything staged for key durable but invisible and
	// returns the descriptor that publishes it. A key with no staged rows
	// yields a valid descriptor that publishes nothing. It may be called
	// again for the same key (a transaction's precommit is retried when
	// another participant or the journal failed it): the descriptor then
	// publishes everything precommitted so far, and a sink that takes no
	// rows after a precommit (upsert, merge_insert) returns the first one.
	Precommit(ctx context.Context, key TxnKey) (Descriptor, error)
	// Commit publishes descs (this server's own descriptor and any handed
	// over from other servers) in one sink commit that also records key
	// (unless key.Auto). Commit is idempotent: if key is already committed
	// it returns the original version with Replayed set and changes nothing.
	// descs are client input: before publishing anything Commit checks that
	// each references only objects under the sink's own root, that exist
	// as stated, and returns ErrInvalid naming the endpoint, the
	// descriptor's index and the file otherwise. ErrInvalid and ErrConflict
	// mean nothing was published (a Kafka sink's dead-letter records
	// excepted: they are at-least-once) and a retry would be refused
	// alike: a decided commit refused so by every endpoint is undone.
	Commit(ctx context.Context, key TxnKey, descs []Descriptor) (CommitInfo, error)
	// Rollback discards what is staged or precommitted for key. Unknown
	// keys are a no-op. Rollback is idempotent.
	Rollback(ctx context.Context, key TxnKey) error

	// CommittedEpoch reads from the sink itself the last epoch committed by
	// writer, for reconciliation after an unknown outcome and for replay
	// detection. ok is false when the writer never committed.
	CommittedEpoch(ctx context.Context, writer string) (epoch int64, ok bool, err error)

	// Contract reports the sink's guarantees.
	Contract() Contract
	// Check probes the sink without side effects (reachability,
	// permissions, table readable). It may be called before Open.
	Check(ctx context.Context) error
}

// DescriptorChecker is implemented by writers that can tell, without
// publishing anything, whether descriptors handed over from other servers
// could be committed under key: the coordinator asks before it decides a
// commit, while the transaction can still be refused as a whole.
type DescriptorChecker interface {
	// CheckDescriptors returns an ErrInvalid error naming the descriptor
	// and the file when Commit(ctx, key, descs) would refuse them, and nil
	// when it would publish them or answer Replayed. It has no side
	// effects.
	CheckDescriptors(ctx context.Context, key TxnKey, descs []Descriptor) error
}

// AttemptFencer is implemented by writers whose storage several servers
// share (Delta, Lance). FenceAttempt records there that attempt of key,
// which precommitted on this server, was fenced or rolled back; Fenced
// tells whether such a record exists, so that a server handed that
// attempt's descriptors refuses to commit them: its precommitted files
// stay (another server may already have published them), only the mark
// says they must not be published now.
type AttemptFencer interface {
	FenceAttempt(ctx context.Context, key TxnKey, attempt string) error
	Fenced(ctx context.Context, key TxnKey, attempt string) (bool, error)
}

// PrecommitDiscarder is implemented by writers whose precommit writes
// files (Delta, Lance). DiscardPrecommitted deletes the files that desc's
// precommit wrote — never a file it only references, like the existing
// files an upsert rewrites — for a precommitted attempt that was rolled
// back, fenced or expired. The coordinator calls it only when no other
// server can hold desc (the descriptor key is the server's own):
// otherwise another server may have published the files, and vacuum
// reclaims them. Missing files are not an error: it is idempotent.
type PrecommitDiscarder interface {
	DiscardPrecommitted(ctx context.Context, desc Descriptor) error
}

// PrecommitKeeper is implemented by writers that protect what a
// precommitted transaction will publish from their own maintenance (Delta:
// the files an upsert read, which optimize must not rewrite under it). The
// writer sets that protection up itself at Precommit; after a restart the
// coordinator hands it the precommitted and decided parts it recovered from
// its journal, once the endpoint is open, so the protection survives the
// restart. Commit succeeding or Rollback ends it, as for the writer's own
// precommits.
type PrecommitKeeper interface {
	// KeepPrecommitted protects what descs, precommitted under key, need.
	// Descriptors it cannot read are ignored: Commit refuses them.
	KeepPrecommitted(key TxnKey, descs []Descriptor)
}

// Targeted is implemented by writers that record a transaction's epoch
// in the table they write, under its writer (Delta's txn app ids, Lance's
// transaction properties), where another endpoint may write the same
// table. One transaction must write such a table through one endpoint:
// the second endpoint's Commit would find the epoch recorded by the first
// and publish nothing.
type Targeted interface {
	// Target names the table: equal for two endpoints that write one; ""
	// for none.
	Target() string
}

// Find returns the T behind w: w itself when it is a T, else the writer
// an Unwrap() Writer method returns (the server's endpoint wrapper), and
// so on. ok is false when there is none (the sink does not implement T,
// or the endpoint is not open).
func Find[T any](w Writer) (t T, ok bool) {
	for w != nil {
		if t, ok := w.(T); ok {
			return t, true
		}
		u, ok := w.(interface{ Unwrap() Writer })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	return t, false
}

// SchemaReporter is implemented by writers whose endpoint has a known schema
// (a fixed configured schema or an existing table).
type SchemaReporter interface {
	// Schema returns the endpoint's schema, or nil when none is known yet
	// (the first stream will define it).
	Schema(ctx context.Context) (*arrow.Schema, error)
}

// SchemaOf returns w's schema when w reports one, nil otherwise.
func SchemaOf(ctx context.Context, w Writer) (*arrow.Schema, error) {
	if sr, ok := w.(SchemaReporter); ok {
		return sr.Schema(ctx)
	}
	return nil, nil
}

// SchemaChecker is implemented by writers that decide themselves whether a
// stream's schema is acceptable, instead of requiring it to equal the
// reported schema.
type SchemaChecker interface {
	// CheckSchema returns an ErrInvalid error naming the column when rows
	// of schema s cannot be written, and nil when they can (also when the
	// endpoint has no schema yet). It has no side effects.
	CheckSchema(ctx context.Context, s *arrow.Schema) error
}

// CheckStreamSchema checks a stream's schema s before any of its rows is
// staged: with w's own rule when w is a SchemaChecker; otherwise s must
// match w's reported schema exactly ([SchemaMismatch]); a writer reporting
// no schema accepts anything. Mismatches are ErrInvalid naming the column.
func CheckStreamSchema(ctx context.Context, w Writer, s *arrow.Schema) error {
	if sc, ok := w.(SchemaChecker); ok {
		return sc.CheckSchema(ctx, s)
	}
	want, err := SchemaOf(ctx, w)
	if err != nil {
		return fmt.Errorf("read the endpoint's schema: %w", err)
	}
	if want == nil {
		return nil
	}
	if diff := SchemaMismatch(want, s); diff != "" {
		return Errorf(ErrInvalid, "the stream's schema does not match the endpoint's: %s", diff)
	}
	return nil
}

// SchemaMismatch compares got against want and describes the first
// difference, naming the column, or returns "" when they match. Field
// metadata is ignored; names, order, types and nullability must agree
// (a non-nullable column accepts a nullable field only if want is nullable).
func SchemaMismatch(want, got *arrow.Schema) string {
	wf, gf := want.Fields(), got.Fields()
	for i := 0; i < len(wf) || i < len(gf); i++ {
		switch {
		case i >= len(gf):
			return fmt.Sprintf("column %q (%s) is missing", wf[i].Name, wf[i].Type)
		case i >= len(wf):
			return fmt.Sprintf("unexpected column %q (%s)", gf[i].Name, gf[i].Type)
		case wf[i].Name != gf[i].Name:
			return fmt.Sprintf("column %d is %q, expected %q", i, gf[i].Name, wf[i].Name)
		case !arrow.TypeEqual(wf[i].Type, gf[i].Type):
			return fmt.Sprintf("column %q has type %s, expected %s", gf[i].Name, gf[i].Type, wf[i].Type)
		case gf[i].Nullable && !wf[i].Nullable:
			return fmt.Sprintf("column %q is nullable, expected non-nullable", gf[i].Name)
		}
	}
	return ""
}

// FieldList formats a schema compactly as "name type, ..." for messages.
func FieldList(s *arrow.Schema) string {
	parts := make([]string, len(s.Fields()))
	for i, f := range s.Fields() {
		parts[i] = f.Name + " " + f.Type.String()
	}
	return strings.Join(parts, ", ")
}

// DecodeDescriptors decodes every descriptor of a Commit with the sink's
// decode, naming endpoint and the index of the first one it refuses.
func DecodeDescriptors[D any](endpoint string, descs []Descriptor, decode func(Descriptor) (D, error)) ([]D, error) {
	out := make([]D, len(descs))
	for i, b := range descs {
		d, err := decode(b)
		if err != nil {
			return nil, fmt.Errorf("%w (endpoint %q, descriptor %d)", err, endpoint, i)
		}
		out[i] = d
	}
	return out, nil
}

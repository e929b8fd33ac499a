package deltalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers/storage"
)

// DefaultMaxAttempts bounds the put attempts of one Commit.
const DefaultMaxAttempts = 15

// CommitOptions describe a commit. The zero value is a blind append.
type CommitOptions struct {
	// Operation is commitInfo.operation; "" means "WRITE".
	Operation string
	// OperationParameters is commitInfo.operationParameters; nil means
	// {"mode": "Append" or "Overwrite", "partitionBy": "[...]"}.
	OperationParameters map[string]any
	// OperationMetrics is commitInfo.operationMetrics; nil writes none.
	OperationMetrics map[string]any
	// ReadWholeTable declares that the commit depends on every file of the
	// read snapshot (overwrite): any concurrent remove conflicts, and so
	// does a concurrent append (under WriteSerializable only a non-blind
	// one).
	ReadWholeTable bool
	// ReadFiles lists add paths the commit read (copy-on-write MERGE); a
	// concurrent remove of one of them conflicts, as do concurrent appends.
	ReadFiles []string
	// TxnID is commitInfo.txnId; "" generates a UUID.
	TxnID string
	// EngineInfo is commitInfo.engineInfo; "" means "quiver".
	EngineInfo string
	// MaxAttempts bounds the put attempts; 0 means DefaultMaxAttempts.
	MaxAttempts int
	// CheckpointInterval, when > 0, overrides delta.checkpointInterval:
	// after committing version v with v % interval == 0 a checkpoint is
	// written.
	CheckpointInterval int
	// Logger reports checkpoint failures after a successful commit (the
	// commit stands); nil discards.
	Logger *slog.Logger
	// Turn, when set, is held while the commit publishes (its attempts,
	// not the checkpoint after). The committers of a process sharing one
	// Turn then take turns instead of racing each other through the
	// store: one whose snapshot an earlier turn made stale is refused
	// before it writes anything, rebases and publishes at once (only a
	// commit of another process can still beat it).
	Turn func(ctx context.Context) (release func(), err error)
}

// Commit writes actions as the next table version with optimistic
// concurrency and returns the committed version.
//
// read is the snapshot the caller planned against; nil creates the table
// (version 0; actions must then hold protocol and metaData and the commit
// fails with ConflictTableExists if version 0 exists), and so does a
// snapshot of a table not created yet ([NewTableSnapshot]), whose protocol
// and metaData the commit writes first (actions may carry a metaData that
// replaces it, e.g. a schema widened by the rows). actions must not
// contain commitInfo: Commit writes it first, with isBlindAppend true only
// when the commit reads nothing (no ReadWholeTable/ReadFiles) and removes
// nothing.
//
// The table must pass CheckWritable, and with delta.appendOnly=true a
// remove with dataChange is refused (ErrUnsupported). On a lost race
// Commit reads the winning commits and applies the conflict rules of
// Delta's optimistic concurrency (docs/delta.md, "How rows become a
// commit"): a
// winner's metaData, a protocol change on both sides, a shared domain, a
// txn for an appId this commit writes, a concurrent remove of a file this
// commit removes or read, and (when reading) a concurrent append are
// *ConflictError (writers.ErrConflict); otherwise it rebases and retries
// at the next version, at most MaxAttempts times with jittered backoff,
// then returns a ConflictRetries *ConflictError. A failed put is classed
// by storage.Publish, as in every sink: a refusal keeps its class, a put
// that published nothing is writers.ErrUnavailable, and one whose outcome
// cannot be established wraps writers.ErrOutcomeUnknown. ctx cancels
// waiting and storage calls.
//
// After success, a checkpoint is written when the version is a multiple of
// the checkpoint interval; its failure is only logged.
func Commit(ctx context.Context, store Store, read *Snapshot, actions []Action, opts CommitOptions) (int64, error) {
	if read != nil && read.Version < 0 {
		read, actions = nil, read.creation(actions)
	}
	in, err := newIntent(read, actions, opts)
	if err != nil {
		return 0, err
	}
	snap, version, err := in.publishTurn(ctx, store, read, opts)
	if err != nil {
		return 0, err
	}
	in.checkpoint(ctx, store, snap, version)
	return version, nil
}

// publishTurn is publishLoop during a turn, when opts.Turn is set.
func (in *intent) publishTurn(ctx context.Context, store Store, read *Snapshot, opts CommitOptions) (*Snapshot, int64, error) {
	if opts.Turn != nil {
		release, err := opts.Turn(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("delta: commit: waiting for the turn to publish: %w", err)
		}
		defer release()
	}
	return in.publishLoop(ctx, store, read, opts)
}

// publishLoop puts the intent as the version after snap, rebasing on the
// winners after each lost race, and returns the snapshot it committed on
// and the version.
func (in *intent) publishLoop(ctx context.Context, store Store, snap *Snapshot, opts CommitOptions) (*Snapshot, int64, error) {
	attempts := opts.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultMaxAttempts
	}
	for attempt := 1; ; attempt++ {
		version := int64(0)
		if snap != nil {
			version = snap.Version + 1
		}
		data, err := in.encode(ctx, store, snap)
		if err != nil {
			return nil, 0, err
		}
		err = putCommit(ctx, store, version, data)
		if err == nil {
			return snap, version, nil
		}
		if !errors.Is(err, storage.ErrAlreadyExists) {
			return nil, 0, err
		}
		if snap == nil {
			return nil, 0, &ConflictError{Kind: ConflictTableExists, WinnerVersion: 0}
		}
		if attempt >= attempts {
			return nil, 0, &ConflictError{Kind: ConflictRetries, WinnerVersion: version}
		}
		if snap, err = in.rebase(ctx, store, snap); err != nil {
			return nil, 0, err
		}
		// The first loss of a turn is mostly to the turns before it,
		// which are done: no one to back off from.
		if opts.Turn != nil && attempt == 1 {
			continue
		}
		if err := backoff(ctx, attempt); err != nil {
			return nil, 0, err
		}
	}
}

// putCommit writes version v with put-if-absent (storage.Publish tells
// what happened when the put fails).
func putCommit(ctx context.Context, store Store, v int64, data []byte) error {
	if err := storage.Publish(ctx, store, CommitKey(v), data); err != nil {
		return fmt.Errorf("delta: commit: %w", err)
	}
	return nil
}

// backoff waits 2^attempt ms (capped at 64 ms), jittered to half..full.
func backoff(ctx context.Context, attempt int) error {
	d := time.Millisecond << min(attempt, 6)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("delta: commit: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}

// Create creates a table: version 0 with protocol, metaData (schema from
// schema, partitionColumns, configuration, a new table id, createdTime) and
// commitInfo operation "CREATE TABLE". It returns the new snapshot. If the
// table exists the error is a ConflictTableExists *ConflictError: Load it
// instead.
func Create(ctx context.Context, store Store, schema *arrow.Schema, partitionColumns []string, configuration map[string]string) (*Snapshot, error) {
	s, err := NewTableSnapshot(schema, partitionColumns, configuration)
	if err != nil {
		return nil, err
	}
	v, err := Commit(ctx, store, s, nil, CommitOptions{
		Operation: "CREATE TABLE",
		OperationParameters: map[string]any{
			"partitionBy": partitionByParam(partitionColumns),
			"description": nil, "isManaged": "false", "properties": "{}",
		},
	})
	if err != nil {
		return nil, err
	}
	created := s.clone()
	created.Version = v
	return created, nil
}

package deltalog

import (
	"errors"
	"fmt"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/storage"
)

var (
	// ErrUnsupported: the table needs a protocol version or table feature
	// Quiver does not implement. It wraps writers.ErrInvalid; the message of
	// the returned error names the feature and the table protocol.
	ErrUnsupported = fmt.Errorf("not supported by Quiver: %w", writers.ErrInvalid)
	// ErrTableNotFound: there is no Delta log at the table root. It wraps
	// writers.ErrNotFound; create the table with Create.
	ErrTableNotFound = fmt.Errorf("delta table does not exist: %w", writers.ErrNotFound)
	// ErrCorrupt: the log cannot be replayed (version gap, missing protocol
	// or metaData, malformed action). It wraps writers.ErrInvalid.
	ErrCorrupt = fmt.Errorf("corrupt delta log: %w", writers.ErrInvalid)
)

// ConflictKind names the conflict rule a winning commit hit (see Commit).
type ConflictKind string

// Conflict kinds, after Spark's ConflictChecker exception names.
const (
	ConflictMetadata     ConflictKind = "metadata changed"
	ConflictProtocol     ConflictKind = "protocol changed"
	ConflictDomain       ConflictKind = "domain metadata changed"
	ConflictTxn          ConflictKind = "concurrent transaction for the same appId"
	ConflictAppend       ConflictKind = "concurrent append into data this commit read"
	ConflictDeleteRead   ConflictKind = "concurrent delete of a file this commit read"
	ConflictDeleteDelete ConflictKind = "concurrent delete of a file this commit removes"
	ConflictTableExists  ConflictKind = "table already exists"
	ConflictRetries      ConflictKind = "commit retries exhausted"
)

// ConflictError reports a commit that lost a race it cannot rebase over. It
// wraps writers.ErrConflict. For Kind == ConflictTxn, AppID and TxnVersion
// give the winner's txn so an exactly-once caller can tell a replay
// (TxnVersion >= its own version: already committed) from a second live
// writer sharing the appId.
type ConflictError struct {
	Kind          ConflictKind
	WinnerVersion int64  // table version of the winning commit
	Path          string // file involved (append/delete kinds), or the domain
	AppID         string // ConflictTxn only
	TxnVersion    int64  // ConflictTxn only: the winner's txn version for AppID
}

func (e *ConflictError) Error() string {
	msg := fmt.Sprintf("delta: commit conflict with version %d: %s", e.WinnerVersion, e.Kind)
	switch {
	case e.Kind == ConflictTxn:
		msg += fmt.Sprintf(" (appId %q, winner txn version %d)", e.AppID, e.TxnVersion)
	case e.Path != "":
		msg += fmt.Sprintf(" (%q)", e.Path)
	}
	return msg + "; reload the table and redo the operation"
}

// Unwrap returns writers.ErrConflict.
func (e *ConflictError) Unwrap() error { return writers.ErrConflict }

// StorageError classifies a storage failure: a missing object stays
// recognisable through storage.ErrNotExist, everything else is
// writers.ErrUnavailable (retrying later may succeed).
func StorageError(op, key string, err error) error {
	if errors.Is(err, storage.ErrNotExist) {
		return fmt.Errorf("delta: %s %s: %w", op, key, err)
	}
	return fmt.Errorf("delta: %s %s: %w: %w", op, key, writers.ErrUnavailable, err)
}

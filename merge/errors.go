package merge

import (
	"fmt"

	"github.com/quiver-ingest/quiver/writers"
)

// RowError reports a row that breaks the changelog convention: an unknown
// _op, a null __weight or a null key value. It wraps writers.ErrInvalid, so
// errors.Is(err, writers.ErrInvalid) holds.
type RowError struct {
	// Row is the row's index in its batch (0-based, relative to the batch's
	// own offset when its arrays are sliced).
	Row int
	// StreamRow is the row's index in the stream: the rows of every batch
	// given to the Collapser before this one, plus Row. For a lone batch it
	// equals Row.
	StreamRow int64
	// Column names the offending column.
	Column string
	// Reason says what is wrong and what to do.
	Reason string
}

func (e *RowError) Error() string {
	return fmt.Sprintf("merge: row %d (stream row %d): column %q: %s", e.Row, e.StreamRow, e.Column, e.Reason)
}

// Unwrap returns writers.ErrInvalid.
func (e *RowError) Unwrap() error { return writers.ErrInvalid }

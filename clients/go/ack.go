package quiver

import (
	"encoding/json"
	"fmt"
)

// Ack is the final acknowledgement of an auto-commit [Client.Put]: the
// stream's rows are committed.
type Ack struct {
	Committed bool  `json:"committed"`
	Rows      int64 `json:"rows"`
	// Version is the table version of the commit (Delta, Lance), nil for
	// sinks without versions.
	Version *int64 `json:"version,omitempty"`
}

// StagedAck is the final acknowledgement of a transactional [Txn.Put].
// Exactly one of Staged and Replayed is true: Replayed means the epoch had
// already committed on the endpoint, so the rows were read and dropped.
type StagedAck struct {
	Staged   bool   `json:"staged,omitempty"`
	Replayed bool   `json:"replayed,omitempty"`
	Rows     int64  `json:"rows"`
	Writer   string `json:"writer"`
	Epoch    int64  `json:"epoch"`
}

// BatchAck is the server's acknowledgement of one batch of a stream.
type BatchAck struct {
	// Index is the batch's 0-based position in the stream, counted by the
	// client (acks arrive in order).
	Index int
	// Batch is the batch number the server reported.
	Batch int64
	// Rows is the batch's row count.
	Rows int64
	// TotalRows is the number of rows acknowledged so far in the stream.
	TotalRows int64
}

// wireAck is any PutResult app_metadata: a batch ack {"batch","rows"} or a
// final ack (no "batch"), auto-commit or transactional.
type wireAck struct {
	Batch     *int64 `json:"batch"`
	Rows      int64  `json:"rows"`
	Committed bool   `json:"committed"`
	Version   *int64 `json:"version"`
	Staged    bool   `json:"staged"`
	Replayed  bool   `json:"replayed"`
	Writer    string `json:"writer"`
	Epoch     int64  `json:"epoch"`

	raw []byte
}

func decodeAck(meta []byte) (wireAck, error) {
	var a wireAck
	if err := json.Unmarshal(meta, &a); err != nil {
		return wireAck{}, fmt.Errorf("undecodable ack %q (is this a Quiver server?): %w", meta, err)
	}
	a.raw = meta
	return a, nil
}

func (a wireAck) commitAck() (Ack, error) {
	if !a.Committed {
		return Ack{}, fmt.Errorf("final ack %s does not say committed", a.raw)
	}
	return Ack{Committed: true, Rows: a.Rows, Version: a.Version}, nil
}

func (a wireAck) stagedAck() (StagedAck, error) {
	if a.Staged == a.Replayed {
		return StagedAck{}, fmt.Errorf("final ack %s must say either staged or replayed", a.raw)
	}
	return StagedAck{Staged: a.Staged, Replayed: a.Replayed, Rows: a.Rows, Writer: a.Writer, Epoch: a.Epoch}, nil
}

package txn

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/quiver-ingest/quiver/txn/journal"
	"github.com/quiver-ingest/quiver/writers"
)

// Record types (docs/journal-format.md, "Records"). Values are on disk:
// never renumber.
const (
	recBegin     byte = 1
	recJoin      byte = 2
	recPrecommit byte = 3
	recDecide    byte = 4
	recCommitted byte = 5
	recAbort     byte = 6
	recEpoch     byte = 7
	// recStreamWriter claims a writer name for continuous streams
	// (ClaimStreamWriter).
	recStreamWriter byte = 8
)

// record is every journal record; which fields a type uses is listed in
// docs/journal-format.md. The JSON names are on disk.
type record struct {
	typ byte

	Writer       string                          `json:"writer"`
	Epoch        int64                           `json:"epoch"`
	Attempt      string                          `json:"attempt,omitempty"`
	At           time.Time                       `json:"at,omitzero"`
	Endpoint     string                          `json:"endpoint,omitempty"`
	TTLMillis    int64                           `json:"ttl_ms,omitempty"`
	Deadline     time.Time                       `json:"deadline,omitzero"`
	Participants []recordPart                    `json:"participants,omitempty"`
	Descriptors  map[string][]writers.Descriptor `json:"descriptors,omitempty"`
	Versions     map[string]int64                `json:"versions,omitempty"`
	Replayed     bool                            `json:"replayed,omitempty"`
	Expired      bool                            `json:"expired,omitempty"`
	// OwesReplay marks the abort of a decided commit that every endpoint
	// refused (recAbort): later epochs of the writer wait until this one
	// is committed, or given up (GaveUp).
	OwesReplay bool `json:"owes_replay,omitempty"`
	// GaveUp marks an abort by the client's GiveUp (recAbort): the
	// epoch's replay is no longer owed.
	GaveUp bool `json:"gave_up,omitempty"`
	// Owner is the caller that began the transaction (recBegin); absent
	// in journals written before owners were recorded.
	Owner string `json:"owner,omitempty"`
}

// recordPart is a participant in a precommit record.
type recordPart struct {
	Endpoint string `json:"endpoint"`
	Rows     int64  `json:"rows"`
	// Digest is the digest of the rows (rowdigest, 16 hex digits);
	// absent when a stream gave none, and in older journals.
	Digest     string             `json:"digest,omitempty"`
	Descriptor writers.Descriptor `json:"descriptor"`
}

func newRecordPart(endpoint string, p *part) recordPart {
	r := recordPart{Endpoint: endpoint, Rows: p.rows, Descriptor: p.desc}
	if !p.undigested {
		r.Digest = fmt.Sprintf("%016x", p.digest)
	}
	return r
}

// tally is what the record says was sent; a digest it cannot read is
// unknown.
func (r recordPart) tally() tally {
	d, err := strconv.ParseUint(r.Digest, 16, 64)
	return tally{rows: r.Rows, digest: d, undigested: err != nil}
}

func (r *record) id() txnID { return txnID{r.Writer, r.Epoch} }

func (r *record) encode() (journal.Record, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return journal.Record{}, fmt.Errorf("txn: encode journal record: %w", err)
	}
	return journal.Record{Type: r.typ, Payload: b}, nil
}

func decodeRecord(jr journal.Record) (*record, error) {
	if jr.Type < recBegin || jr.Type > recStreamWriter {
		return nil, fmt.Errorf("txn: journal record of unknown type %d: was the journal written by a newer quiver?", jr.Type)
	}
	r := &record{typ: jr.Type}
	if err := json.Unmarshal(jr.Payload, r); err != nil {
		return nil, fmt.Errorf("txn: decode journal record of type %d: %w", jr.Type, err)
	}
	return r, nil
}

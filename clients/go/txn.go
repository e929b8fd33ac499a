package quiver

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
)

// TxnState is a transaction's state on the server.
type TxnState string

// Transaction states: open → precommitted → committed | aborted.
const (
	StateOpen         TxnState = "open"
	StatePrecommitted TxnState = "precommitted"
	StateCommitted    TxnState = "committed"
	StateAborted      TxnState = "aborted"
)

// Participant is one endpoint taking part in a transaction.
type Participant struct {
	Endpoint string `json:"endpoint"`
	Rows     int64  `json:"rows"`
	// Descriptor is the opaque precommit result that publishes the
	// endpoint's staged rows, sealed by the server; hand it unchanged to
	// another server's commit (servers sharing the descriptor key) to
	// publish everything in one table commit. Set once precommitted.
	Descriptor []byte `json:"descriptor,omitempty"`
	// Version is the endpoint's table version once committed, nil for
	// sinks without versions.
	Version *int64 `json:"version,omitempty"`
}

// EndpointCommit is one endpoint's commit result.
type EndpointCommit struct {
	// Version is the table version of the commit, nil for sinks without
	// versions.
	Version *int64 `json:"version,omitempty"`
}

// TxnStatus is what every transaction action answers. Which fields are set
// depends on the action: Participants after precommit and status,
// Endpoints after commit.
type TxnStatus struct {
	Writer       string                    `json:"writer"`
	Epoch        int64                     `json:"epoch"`
	State        TxnState                  `json:"state"`
	Participants []Participant             `json:"participants,omitempty"`
	Endpoints    map[string]EndpointCommit `json:"endpoints,omitempty"`
	// Replayed: the epoch had already committed before this call, which
	// changed nothing.
	Replayed bool `json:"replayed,omitempty"`
}

// Txn is a handle on transaction (writer, epoch). It holds no state of its
// own: any number of Txn values, in any processes, may name the same
// transaction, and its methods are safe for concurrent use (several Puts,
// also to different endpoints, may join one transaction at once).
type Txn struct {
	c      *Client
	writer string
	epoch  int64
}

// Txn returns a handle on transaction (writer, epoch) without calling the
// server: the first Put begins the transaction with the server's default
// TTL. Epochs are int64 ≥ 0 and only grow per writer.
func (c *Client) Txn(writer string, epoch int64) *Txn {
	return &Txn{c: c, writer: writer, epoch: epoch}
}

// Begin opens transaction (writer, epoch) explicitly, with a TTL (rounded
// up to whole seconds; 0 means the server's default): an idle transaction
// is rolled back when it expires. Beginning a newer epoch aborts the
// writer's older open transactions. Beginning an open transaction again
// refreshes its TTL.
func (c *Client) Begin(ctx context.Context, writer string, epoch int64, ttl time.Duration) (*Txn, error) {
	body := struct {
		txnKey
		TTL int64 `json:"ttl_s,omitempty"`
	}{txnKey{writer, epoch}, int64((ttl + time.Second - 1) / time.Second)}
	var st TxnStatus
	if err := c.action(ctx, "begin", body, &st); err != nil {
		return nil, err
	}
	return c.Txn(writer, epoch), nil
}

// Writer returns the transaction's writer.
func (t *Txn) Writer() string { return t.writer }

// Epoch returns the transaction's epoch.
func (t *Txn) Epoch() int64 { return t.epoch }

// Put stages every batch of r for endpoint in the transaction; the rows
// stay invisible until Commit. For an epoch the writer already committed
// on endpoint the server reads and drops the rows and the ack says
// Replayed. A Put that fails part-way poisons the transaction: roll it back
// and replay the epoch. Blocking, cancellation and batch ownership are as
// for [Client.Put].
func (t *Txn) Put(ctx context.Context, endpoint string, r array.RecordReader, opts ...PutOption) (StagedAck, error) {
	cmd, err := json.Marshal(struct {
		Endpoint string `json:"endpoint"`
		Writer   string `json:"writer"`
		Epoch    int64  `json:"epoch"`
	}{endpoint, t.writer, t.epoch})
	if err != nil {
		return StagedAck{}, fmt.Errorf("quiver: put to %q in %s: %w", endpoint, t, err)
	}
	desc := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd}
	final, err := t.c.put(ctx, desc, r, opts)
	if err != nil {
		return StagedAck{}, fmt.Errorf("quiver: put to %q in %s: %w", endpoint, t, err)
	}
	ack, err := final.stagedAck()
	if err != nil {
		return StagedAck{}, fmt.Errorf("quiver: put to %q in %s: %w", endpoint, t, err)
	}
	return ack, nil
}

// Precommit makes every participant's staged rows durable but invisible
// and returns their descriptors. It fails with FailedPrecondition while a
// Put of the transaction is still running or after one failed. Idempotent.
func (t *Txn) Precommit(ctx context.Context) (TxnStatus, error) {
	return t.call(ctx, "precommit", t.key())
}

// Commit publishes the transaction; handed adds descriptors precommitted by
// other servers (endpoint → descriptors) to the same table commits. It is
// allowed only once precommitted and is idempotent; an epoch that had
// already committed answers committed with Replayed. A codes.Unknown error
// means the outcome is unknown: reconcile with [Client.CommittedEpoch].
func (t *Txn) Commit(ctx context.Context, handed map[string][][]byte) (TxnStatus, error) {
	body := struct {
		txnKey
		Descriptors map[string][][]byte `json:"descriptors,omitempty"`
	}{t.key(), handed}
	return t.call(ctx, "commit", body)
}

// Rollback aborts the transaction and discards its staged rows.
// Idempotent; rolling back a committed transaction is FailedPrecondition.
func (t *Txn) Rollback(ctx context.Context) (TxnStatus, error) {
	return t.call(ctx, "rollback", t.key())
}

// Status reports the transaction's state; an unknown transaction is
// NotFound.
func (t *Txn) Status(ctx context.Context) (TxnStatus, error) {
	return t.call(ctx, "status", t.key())
}

// String returns "transaction writer@epoch", for messages.
func (t *Txn) String() string { return fmt.Sprintf("transaction %s@%d", t.writer, t.epoch) }

type txnKey struct {
	Writer string `json:"writer"`
	Epoch  int64  `json:"epoch"`
}

func (t *Txn) key() txnKey { return txnKey{t.writer, t.epoch} }

func (t *Txn) call(ctx context.Context, action string, body any) (TxnStatus, error) {
	var st TxnStatus
	err := t.c.action(ctx, action, body, &st)
	return st, err
}

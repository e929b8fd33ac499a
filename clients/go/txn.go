package quiver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
	// Attempt names the attempt of the transaction the answer is about
	// (empty when the server answered without one).
	Attempt string `json:"attempt,omitempty"`
}

// Txn is one attempt of transaction (writer, epoch). Every begin of an
// epoch starts a new attempt and fences the current one (its staged rows
// are discarded), so that a replay after a crash never mixes with what
// the crashed process left. Once begun, a Txn names its attempt in every
// Put, Precommit, Commit and Rollback, and never acts on another attempt:
// a call on a fenced attempt is FailedPrecondition. Its methods are safe
// for concurrent use (several Puts, also to different endpoints, may join
// one attempt at once); share one Txn rather than making two for one
// epoch, which would fence each other.
type Txn struct {
	c      *Client
	writer string
	epoch  int64

	mu      sync.Mutex // held while beginning
	attempt string
	begun   bool
}

// Txn returns a handle on transaction (writer, epoch) without calling the
// server: its first Put begins a new attempt with the server's default TTL
// (fencing an earlier attempt of the epoch), and later calls name that
// attempt. Precommit, Commit and Rollback of a handle that has not begun
// name no attempt and act on the epoch's current one (a process
// committing, after a restart, what it precommitted before). Epochs are
// int64 ≥ 0 and only grow per writer.
func (c *Client) Txn(writer string, epoch int64) *Txn {
	return &Txn{c: c, writer: writer, epoch: epoch}
}

// beginRetryFor bounds how long Begin retries while the server is still
// ending the streams of the attempt it fences.
const beginRetryFor = 30 * time.Second

// Begin starts a new attempt of transaction (writer, epoch) with a TTL
// (rounded up to whole seconds; 0 means the server's default), fencing
// the epoch's current attempt: an open one, or a precommitted one whose
// commit is not decided (use [Client.Resume] to keep it). An idle attempt
// is rolled back when its TTL expires. Beginning a newer epoch aborts the
// writer's older open transactions. Beginning an epoch that had committed
// answers a Txn whose Put and Commit change nothing (Replayed). While the
// server is still ending a fenced attempt's streams (FailedPrecondition
// "retry shortly"), Begin retries for up to 30 s, within ctx.
func (c *Client) Begin(ctx context.Context, writer string, epoch int64, ttl time.Duration) (*Txn, error) {
	t := c.Txn(writer, epoch)
	if _, err := t.begin(ctx, ttl, false); err != nil {
		return nil, err
	}
	return t, nil
}

// Resume is Begin, except that a precommitted attempt is kept rather than
// fenced, and the returned Txn names it, so that Commit publishes what it
// precommitted: what a process restarting from a checkpoint that recorded
// the precommit wants. For an open (or no) attempt it begins a new one,
// like Begin. The returned status says which (State precommitted, open,
// or committed with Replayed).
func (c *Client) Resume(ctx context.Context, writer string, epoch int64, ttl time.Duration) (*Txn, TxnStatus, error) {
	t := c.Txn(writer, epoch)
	st, err := t.begin(ctx, ttl, true)
	if err != nil {
		return nil, TxnStatus{}, err
	}
	return t, st, nil
}

// begin runs the begin action (t.mu held or t not shared yet) and stores
// the attempt.
func (t *Txn) begin(ctx context.Context, ttl time.Duration, resume bool) (TxnStatus, error) {
	body := struct {
		txnKey
		TTL    int64 `json:"ttl_s,omitempty"`
		Resume bool  `json:"resume,omitempty"`
	}{txnKey{Writer: t.writer, Epoch: t.epoch}, int64((ttl + time.Second - 1) / time.Second), resume}
	deadline := time.Now().Add(beginRetryFor)
	pause := 50 * time.Millisecond
	for {
		var st TxnStatus
		err := t.c.action(ctx, "begin", body, &st)
		if err == nil {
			t.attempt, t.begun = st.Attempt, true
			return st, nil
		}
		if !stillEnding(err) || time.Now().Add(pause).After(deadline) {
			return TxnStatus{}, err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return TxnStatus{}, err
		}
		pause = min(2*pause, time.Second)
	}
}

// stillEnding reports whether err is a begin refused only because a fenced
// attempt's streams or rollbacks are still ending.
func stillEnding(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return false
	}
	return strings.Contains(st.Message(), "retry shortly") || strings.Contains(st.Message(), "still being rolled back")
}

// ensureBegun begins an attempt unless t has one.
func (t *Txn) ensureBegun(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.begun {
		return nil
	}
	_, err := t.begin(ctx, 0, false)
	return err
}

// Attempt returns the attempt t names ("" before it has begun).
func (t *Txn) Attempt() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.attempt
}

// Writer returns the transaction's writer.
func (t *Txn) Writer() string { return t.writer }

// Epoch returns the transaction's epoch.
func (t *Txn) Epoch() int64 { return t.epoch }

// Put stages every batch of r for endpoint in t's attempt (begun first if
// t has none); the rows stay invisible until Commit. For an epoch the writer already committed
// on endpoint the server reads and drops the rows and the ack says
// Replayed. A Put that fails part-way poisons the transaction: roll it back
// and replay the epoch. Blocking, cancellation and batch ownership are as
// for [Client.Put].
func (t *Txn) Put(ctx context.Context, endpoint string, r array.RecordReader, opts ...PutOption) (StagedAck, error) {
	if err := t.ensureBegun(ctx); err != nil {
		return StagedAck{}, fmt.Errorf("quiver: put to %q in %s: %w", endpoint, t, err)
	}
	cmd, err := json.Marshal(struct {
		Endpoint string `json:"endpoint"`
		Writer   string `json:"writer"`
		Epoch    int64  `json:"epoch"`
		Attempt  string `json:"attempt,omitempty"`
	}{endpoint, t.writer, t.epoch, t.Attempt()})
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

// Rollback aborts t's attempt and discards its staged rows. If another
// attempt has fenced t's, it answers that attempt's status, untouched.
// Idempotent; rolling back a committed transaction is FailedPrecondition.
func (t *Txn) Rollback(ctx context.Context) (TxnStatus, error) {
	return t.call(ctx, "rollback", t.key())
}

// GiveUp is Rollback that also gives up the replay the epoch owes after
// the server undid its commit (every endpoint refused it): the writer's
// later epochs may then commit, and the epoch's rows are lost unless it is
// replayed before them. A plain Rollback leaves the replay owed.
func (t *Txn) GiveUp(ctx context.Context) (TxnStatus, error) {
	body := struct {
		txnKey
		GiveUp bool `json:"give_up"`
	}{t.key(), true}
	return t.call(ctx, "rollback", body)
}

// Status reports the transaction's state; an unknown transaction is
// NotFound.
func (t *Txn) Status(ctx context.Context) (TxnStatus, error) {
	return t.call(ctx, "status", txnKey{Writer: t.writer, Epoch: t.epoch})
}

// String returns "transaction writer@epoch", for messages.
func (t *Txn) String() string { return fmt.Sprintf("transaction %s@%d", t.writer, t.epoch) }

type txnKey struct {
	Writer  string `json:"writer"`
	Epoch   int64  `json:"epoch"`
	Attempt string `json:"attempt,omitempty"`
}

// key names t's transaction and, once begun, its attempt.
func (t *Txn) key() txnKey { return txnKey{t.writer, t.epoch, t.Attempt()} }

func (t *Txn) call(ctx context.Context, action string, body any) (TxnStatus, error) {
	var st TxnStatus
	err := t.c.action(ctx, action, body, &st)
	return st, err
}

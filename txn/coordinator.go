package txn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/quiver-ingest/quiver/txn/journal"
	"github.com/quiver-ingest/quiver/writers"
)

// Defaults of the unexported knobs (tests shorten them).
const (
	defaultSegmentBytes  = 16 << 20
	defaultCommitTimeout = 2 * time.Minute
	defaultTick          = time.Second
	minRetention         = time.Hour
)

// txnID identifies a transaction.
type txnID struct {
	writer string
	epoch  int64
}

func (id txnID) String() string { return fmt.Sprintf("%s@%d", id.writer, id.epoch) }

// part is one participant endpoint's staged work.
type part struct {
	tally
	desc writers.Descriptor
	// turn is held by the stream writing a batch to the endpoint
	// (Stream.Turn); made by the first one.
	turn chan struct{}
}

// txn is one transaction.
type txn struct {
	id txnID
	// op serializes the work on this transaction that journals or calls
	// sinks (begin, join of a new endpoint, precommit, commit, rollback,
	// expiry), so that a sink never sees Write racing Precommit or
	// Rollback of the same key. Lock order: op, then Coordinator.gate,
	// then Coordinator.mu; op of a newer epoch before op of an older one
	// (fencing).
	op sync.Mutex

	// The fields below are guarded by Coordinator.mu.

	// gone: removed from Coordinator.txns (creation failed, or forgotten
	// after the retention); whoever waited on op must look it up again.
	gone bool
	// pending: created in memory, its first record not yet journaled.
	pending  bool
	state    State
	ttl      time.Duration
	deadline time.Time
	// busy counts its streams working on the server's side (Stream.Busy):
	// its ttl runs only while none is.
	busy    int
	since   time.Time // when it was begun, or precommitted once it is (journal time)
	ended   time.Time // when it became committed or aborted
	parts   map[string]*part
	streams int    // streams joined and not Done
	poison  string // why a stream failed
	// undoing: abortDecided is undoing the decision, which the abort's
	// record clears: its attempt is fenced as a precommitted
	// transaction's is (its files are left to vacuum). owedBefore: the
	// epoch already owed its replay (this was one), so an undo that
	// fails settles nothing.
	undoing, owedBefore bool
	// starting: a begin of it is being journaled (start).
	starting bool
	// decision is non-nil once the commit is decided and until it is
	// finished: endpoint → descriptors to commit.
	decision map[string][]writers.Descriptor
	done     map[string]writers.CommitInfo // endpoints of the decision already committed
	versions map[string]int64              // once committed
	replayed bool
	// owner is the caller that began it (Caller.Owner); "" none.
	owner string
	// staged is the bytes its streams wrote (Stream.Stage), counted in
	// Coordinator.stagedBy while it is live.
	staged int64
	// discard lists the endpoints still to roll back after an abort: kept
	// while streams are active (Write must not race Rollback) or when a
	// sink Rollback failed.
	discard []string
	// undiscarded holds the descriptors of an aborted precommit whose
	// files a sink failed to delete (discardPrecommitted), by endpoint,
	// for the next Rollback to retry.
	undiscarded map[string]writers.Descriptor
	// rollingBack counts the discardParts calls whose sink rollbacks are
	// still running: the key is every attempt's, so no new attempt may
	// start before they end.
	rollingBack int
	// expired: the abort was the ttl's.
	expired bool
	// cuts cancel the contexts of the streams writing (Stream.Context)
	// when the transaction is aborted.
	cuts map[*Stream]context.CancelCauseFunc
	// attempt is the current attempt's id (attempt.go); "" for one begun
	// before attempts existed. conn is the connection that began it ("":
	// none, or recovered after a restart). dead lists the ids of fenced
	// and rolled-back attempts, newest last.
	attempt string
	conn    string
	dead    []string
	// replays tallies what replayed streams of a committed t sent, by
	// endpoint, until a commit compares it (checkReplayLocked).
	replays map[string]*tally
}

func (t *txn) live() bool { return t.state == StateOpen || t.state == StatePrecommitted }

// abortedErr is what a stream of t, aborted, fails with.
func (t *txn) abortedErr() error {
	if t.expired {
		return writers.Errorf(writers.ErrWrongState, "txn: %s expired: no batch and no action for its ttl of %s, so it was rolled back; begin it again and replay the epoch", t.id, t.ttl)
	}
	return writers.Errorf(writers.ErrWrongState, "txn: %s was aborted (rolled back, or fenced by a newer epoch) while this stream wrote: begin it again to replay the epoch", t.id)
}

func (t *txn) key() writers.TxnKey { return writers.TxnKey{Writer: t.id.writer, Epoch: t.id.epoch} }

// epochKey names the last committed epoch of a writer on an endpoint.
type epochKey struct{ writer, endpoint string }

// Coordinator runs transactions. All methods are safe for concurrent use.
type Coordinator struct {
	eps       Endpoints
	logger    *slog.Logger
	now       func() time.Time
	ttl       time.Duration
	maxTTL    time.Duration // Options.MaxTTLOfBegin
	maxOpen   int           // Options.MaxOpenPerOwner
	maxStaged int64         // Options.MaxStagedPerOwner
	retention time.Duration
	crash     func(point string)
	metrics   *metrics
	tracer    trace.Tracer
	j         *journal.Journal

	// Unexported knobs, shortened by tests.
	segmentBytes  int64
	commitTimeout time.Duration
	newAttempt    func() string // attempt ids; tests make them predictable
	replayCheck   ReplayCheck
	// discardPrecommits is Options.DiscardPrecommitted.
	discardPrecommits bool

	// gate is held shared while a record is appended and applied, and
	// exclusively by compaction, which so sees the journal and the state
	// agree.
	gate       sync.RWMutex
	compacting atomic.Bool

	mu   sync.Mutex // guards the following fields and the txn fields
	txns map[txnID]*txn
	// liveByWriter indexes open and precommitted transactions for fencing.
	liveByWriter map[string]map[int64]*txn
	// committed is the last epoch each writer committed on each endpoint,
	// from the journal and from the sinks (-1: the sink says never). It is
	// small and kept forever.
	committed map[epochKey]int64
	// writerMax is the highest committed epoch of each writer on any
	// endpoint.
	writerMax map[string]int64
	// stagedBy is the bytes staged in each owner's live transactions
	// (Stream.Stage).
	stagedBy map[string]int64
	// streamWriters are the writers of continuous streams
	// (ClaimStreamWriter), which transactions refuse.
	streamWriters map[string]bool
	// claims are the stream-writer claims being journaled: a second claim
	// of the writer waits for the first's outcome, and a compaction leaves
	// them out (their own record lands after it).
	claims map[string]*claim
	// replayOwed is, per writer, the epochs (ascending) whose refused
	// commits were undone (markUndoing) and are neither committed again
	// nor given up: a later epoch committing first would make a replay
	// read as a replay and be dropped, so epochs above the first wait.
	// Journaled: an abort with OwesReplay adds one, its committed record
	// or an abort with GaveUp (the client gives it up: GiveUp) settles it.
	replayOwed map[string][]int64
	// oneEpoch: Options.OneEpoch.
	oneEpoch func(writer string) bool

	ctx       context.Context // canceled by Close; bounds background sink calls
	cancel    context.CancelFunc
	stopc     chan struct{}
	donec     chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Open replays the journal in opts.Dir and returns a running coordinator:
// decided commits are finished (calling Commit on the sinks again, which is
// idempotent; a failure is logged and the decision kept for a later Commit),
// precommitted transactions stay precommitted with their deadlines, open
// ones are aborted and rolled back. A torn journal tail is truncated with a
// warning; corruption elsewhere returns a *CorruptionError naming file and
// offset. ctx bounds the sink calls of recovery. Open starts the expiry
// goroutine, stopped by Close.
func Open(ctx context.Context, opts Options, eps Endpoints) (*Coordinator, error) {
	return open(ctx, opts, eps, defaultTick, nil)
}

// open is Open with the knobs tests change: the expiry tick and a hook run
// before recovery.
func open(ctx context.Context, opts Options, eps Endpoints, tick time.Duration, tune func(*Coordinator)) (*Coordinator, error) {
	if opts.Dir == "" {
		return nil, writers.Errorf(writers.ErrInvalid, "txn: Options.Dir is required (the journal directory under data_dir)")
	}
	if opts.TTL > MaxTTL {
		return nil, writers.Errorf(writers.ErrInvalid, "txn: Options.TTL %s is above the maximum %s", opts.TTL, MaxTTL)
	}
	if opts.MaxTTLOfBegin > MaxTTL || opts.MaxTTLOfBegin < 0 {
		return nil, writers.Errorf(writers.ErrInvalid, "txn: Options.MaxTTLOfBegin %s must be from 0 to %s", opts.MaxTTLOfBegin, MaxTTL)
	}
	c := &Coordinator{
		eps:               eps,
		logger:            opts.Logger,
		now:               opts.Now,
		ttl:               opts.TTL,
		maxTTL:            cmp.Or(opts.MaxTTLOfBegin, MaxTTL),
		maxOpen:           opts.MaxOpenPerOwner,
		maxStaged:         opts.MaxStagedPerOwner,
		stagedBy:          make(map[string]int64),
		tracer:            newTracer(opts.TracerProvider),
		segmentBytes:      defaultSegmentBytes,
		commitTimeout:     defaultCommitTimeout,
		newAttempt:        newAttempt,
		replayCheck:       cmp.Or(opts.ReplayCheck, ReplayWarn),
		discardPrecommits: opts.DiscardPrecommitted,
		oneEpoch:          opts.OneEpoch,
		txns:              make(map[txnID]*txn),
		liveByWriter:      make(map[string]map[int64]*txn),
		committed:         make(map[epochKey]int64),
		writerMax:         make(map[string]int64),
		streamWriters:     make(map[string]bool),
		claims:            make(map[string]*claim),
		replayOwed:        make(map[string][]int64),
		stopc:             make(chan struct{}),
		donec:             make(chan struct{}),
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.ttl <= 0 {
		c.ttl = DefaultTTL
	}
	c.retention = max(c.ttl, minRetention)
	crash, err := crashHook(c.logger)
	if err != nil {
		return nil, err
	}
	c.crash = crash
	if tune != nil {
		tune(c)
	}
	j, recs, err := journal.Open(opts.Dir, journal.Options{Logger: c.logger, Registerer: opts.Registerer})
	if err != nil {
		return nil, err
	}
	c.j = j
	if c.metrics, err = newMetrics(opts.Registerer, c); err != nil {
		return nil, errors.Join(err, j.Close())
	}
	if err := c.recover(ctx, recs); err != nil {
		c.metrics.unregister()
		return nil, errors.Join(err, j.Close())
	}
	c.maybeCompact()
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.run(tick)
	return c, nil
}

// Close stops background work and closes the journal. Calls after Close
// fail with ErrUnavailable. Idempotent.
func (c *Coordinator) Close() error {
	c.closeOnce.Do(func() {
		close(c.stopc)
		c.cancel()
		<-c.donec
		c.metrics.unregister()
		c.closeErr = c.j.Close()
	})
	return c.closeErr
}

// JournalHealth is nil while the journal takes appends, else why it
// cannot: every transaction action fails meanwhile (ErrUnavailable).
func (c *Coordinator) JournalHealth() error { return c.j.Health() }

// checkJournal runs the journal's self-test (journal.Journal.Check); the
// journal logs its failures and recoveries itself.
func (c *Coordinator) checkJournal() { _ = c.j.Check() }

// log appends recs to the journal and, once they are durable, applies them
// to the state together with then (run under c.mu, may be nil). Nothing is
// applied when the append fails.
func (c *Coordinator) log(then func(), recs ...*record) error {
	jrs := make([]journal.Record, len(recs))
	for i, r := range recs {
		jr, err := r.encode()
		if err != nil {
			return err
		}
		jrs[i] = jr
	}
	c.gate.RLock()
	err := c.j.Append(jrs...)
	if err == nil {
		c.mu.Lock()
		for _, r := range recs {
			c.applyLocked(r)
		}
		if then != nil {
			then()
		}
		c.mu.Unlock()
	}
	c.gate.RUnlock()
	if err != nil {
		return fmt.Errorf("txn: journal: %w: %w", err, writers.ErrUnavailable)
	}
	c.maybeCompact()
	return nil
}

// lockTxn returns transaction id with its op lock held, or nil when the
// coordinator has no such transaction.
func (c *Coordinator) lockTxn(id txnID) *txn {
	for {
		c.mu.Lock()
		t := c.txns[id]
		c.mu.Unlock()
		if t == nil {
			return nil
		}
		t.op.Lock()
		c.mu.Lock()
		gone := t.gone
		c.mu.Unlock()
		if !gone {
			return t
		}
		t.op.Unlock()
	}
}

// newTxnLocked adds a transaction in state, pending until its first record
// is journaled, with its op lock held.
func (c *Coordinator) newTxnLocked(id txnID, state State) *txn {
	t := &txn{id: id, state: state, pending: true, ttl: c.ttl, parts: make(map[string]*part)}
	t.op.Lock()
	c.txns[id] = t
	c.indexLocked(t)
	return t
}

// dropLocked forgets t.
func (c *Coordinator) dropLocked(t *txn) {
	t.gone = true
	delete(c.txns, t.id)
	if m := c.liveByWriter[t.id.writer]; m[t.id.epoch] == t {
		delete(m, t.id.epoch)
		if len(m) == 0 {
			delete(c.liveByWriter, t.id.writer)
		}
	}
}

// indexLocked keeps liveByWriter in step with t.state.
func (c *Coordinator) indexLocked(t *txn) {
	m := c.liveByWriter[t.id.writer]
	if t.live() {
		if m == nil {
			m = make(map[int64]*txn)
			c.liveByWriter[t.id.writer] = m
		}
		m[t.id.epoch] = t
		return
	}
	if m[t.id.epoch] == t {
		delete(m, t.id.epoch)
		if len(m) == 0 {
			delete(c.liveByWriter, t.id.writer)
		}
	}
}

// refreshLocked restarts t's inactivity deadline.
func (c *Coordinator) refreshLocked(t *txn) { t.deadline = c.now().Add(t.ttl) }

// statusLocked describes t.
func (c *Coordinator) statusLocked(t *txn) Status {
	st := Status{Writer: t.id.writer, Epoch: t.id.epoch, State: t.state, Replayed: t.replayed, Attempt: t.attempt, Owner: t.owner}
	if t.live() {
		st.Deadline, st.Since = t.deadline, t.since
	}
	eps := make(map[string]bool, len(t.parts))
	for ep := range t.parts {
		eps[ep] = true
	}
	for ep := range t.decision {
		eps[ep] = true
	}
	for ep := range t.versions {
		eps[ep] = true
	}
	for ep := range eps {
		p := Participant{Endpoint: ep, Version: writers.NoVersion}
		if own := t.parts[ep]; own != nil {
			p.Rows, p.Descriptor = own.rows, own.desc
		}
		if v, ok := t.versions[ep]; ok {
			p.Version = v
		}
		st.Participants = append(st.Participants, p)
	}
	sort.Slice(st.Participants, func(i, k int) bool { return st.Participants[i].Endpoint < st.Participants[k].Endpoint })
	return st
}

// Status reports a transaction; unknown ones are ErrNotFound, and with an
// Access (WithAccess) one touching a refused endpoint ErrPermissionDenied.
func (c *Coordinator) Status(ctx context.Context, writer string, epoch int64) (Status, error) {
	id, err := checkID(ctx, "status", writer, epoch)
	if err != nil {
		return Status{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.txns[id]
	if t == nil || t.pending {
		return Status{}, c.notFound(id)
	}
	if err := c.mayUseLocked(ctx, "status", t); err != nil {
		return Status{}, err
	}
	return c.statusLocked(t), nil
}

// OpenTransactions returns the number of open and precommitted
// transactions (for metrics and health).
func (c *Coordinator) OpenTransactions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.liveByWriter {
		n += len(m)
	}
	return n
}

// Live describes every open and precommitted transaction, oldest first
// (for the status page; no permission check: the caller filters).
func (c *Coordinator) Live() []Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Status
	for _, m := range c.liveByWriter {
		for _, t := range m {
			if !t.pending {
				out = append(out, c.statusLocked(t))
			}
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Since.Before(out[k].Since) })
	return out
}

// liveCounts counts the open and the precommitted transactions.
func (c *Coordinator) liveCounts() (open, precommitted int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.liveByWriter {
		for _, t := range m {
			if t.state == StatePrecommitted {
				precommitted++
			} else {
				open++
			}
		}
	}
	return open, precommitted
}

// oldestPrecommitted is how long the oldest precommitted transaction has
// waited for its commit, zero when none waits.
func (c *Coordinator) oldestPrecommitted() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var oldest time.Duration
	now := c.now()
	for _, m := range c.liveByWriter {
		for _, t := range m {
			if t.state == StatePrecommitted && !t.since.IsZero() {
				oldest = max(oldest, now.Sub(t.since))
			}
		}
	}
	return oldest
}

// checkID validates a transaction identity for op, and that ctx's
// caller may use its writer name (WithWriters).
func checkID(ctx context.Context, op, writer string, epoch int64) (txnID, error) {
	if writer == "" {
		return txnID{}, writers.Errorf(writers.ErrInvalid, "txn: writer is empty: name the producer (for example \"orders-pipeline/p3\")")
	}
	if len(writer) > MaxWriterBytes {
		// Not quoted: it may be megabytes.
		return txnID{}, writers.Errorf(writers.ErrInvalid, "txn: writer name of %d bytes is longer than the maximum of %d bytes", len(writer), MaxWriterBytes)
	}
	if epoch < 0 {
		return txnID{}, writers.Errorf(writers.ErrInvalid, "txn: epoch %d of writer %q is negative: epochs are int64 >= 0", epoch, writer)
	}
	if err := refuseWriter(ctx, op, writer); err != nil {
		return txnID{}, err
	}
	return txnID{writer, epoch}, nil
}

// writerOf returns the writer of endpoint or an ErrNotFound error.
func (c *Coordinator) writerOf(endpoint string) (writers.Writer, error) {
	w, ok := c.eps.Writer(endpoint)
	if !ok {
		return nil, writers.Errorf(writers.ErrNotFound, "txn: unknown endpoint %q: check the endpoint name against the server's config", endpoint)
	}
	return w, nil
}

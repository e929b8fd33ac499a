package groupcommit

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/quiver-ingest/quiver/writers"
)

// Options configure a Committer.
type Options struct {
	// Endpoint names the endpoint in errors, logs and metrics.
	Endpoint string
	// Writer is the endpoint's writer; writers.Find must find a
	// writers.SeqCommitter behind it.
	Writer writers.Writer
	Config writers.GroupCommit
	// Metrics; nil records nothing.
	Metrics *Metrics
	// Log; nil discards.
	Log *slog.Logger
	// CommitTimeout bounds one group's precommit and commit; zero means
	// 2 minutes.
	CommitTimeout time.Duration
}

// Unknown outcomes of a group's commit are retried this often, with the
// group's seqs telling a retry whether the first try landed.
const (
	unknownRetries = 3
	unknownBackoff = 200 * time.Millisecond
)

// Committer runs the group commits of one endpoint. It is safe for
// concurrent use.
type Committer struct {
	endpoint string
	w        writers.Writer
	sc       writers.SeqCommitter
	cfg      writers.GroupCommit
	m        endpointMetrics
	log      *slog.Logger
	timeout  time.Duration

	// writeMu is held by a sink Write into the current group and by the
	// swap of groups: a group's key sees no Write once it is swapped out,
	// and Writes of one key never run concurrently (the Writer contract).
	writeMu sync.Mutex

	mu  sync.Mutex // guards the fields below and those of groups and streams
	cur *group
	// committing is true while a swapped-out group is being published.
	committing bool
	// room is closed, and replaced, when a group is swapped out and when
	// a commit ends: Writes waiting for the current group to have room
	// look again.
	room    chan struct{}
	streams map[string]*Stream // the open stream of each writer
	writers map[string]*writerState
	// closed refuses new streams (Close); stopped refuses Writes: the
	// last group commit has begun.
	closed, stopped bool
	// alone, when set, is a stream whose batch the sink refused in a
	// shared group: the current group is fresh and its own until it wrote
	// the batch again, and other streams' Writes wait for that one Write.
	alone *Stream
	// lonely are the streams waiting to be alone, first come first
	// served: each swap of groups makes the first of them alone. Other
	// streams go on writing to the current group meanwhile.
	lonely []*Stream

	kick   chan struct{} // commit now: the current group is full
	ctx    context.Context
	cancel context.CancelFunc
	stopc  chan struct{}
	donec  chan struct{}
	once   sync.Once
}

// writerState is what the committer knows of one stream writer.
type writerState struct {
	// durable is the writer's last committed seq (-1: none), as read
	// from the sink when its stream opened and advanced by this server's
	// commits since.
	durable int64
	// last is the newest group holding rows of the writer, until it ends.
	last *group
}

// group is the rows of one interval, staged under one auto-commit key.
type group struct {
	key     writers.TxnKey
	seqs    []writers.WriterSeq // in the order writers first wrote
	seqAt   map[string]int      // writer → index in seqs
	members map[*Stream]int64   // stream → its rows in the group
	unseq   map[*Stream]int64   // stream → its rows in the group sent without seq
	rows    int64
	bytes   int64
	written []time.Time // when each batch was written, for the ack latency
	// poisoned is set when the group must not be published: a sink Write
	// failed part way through a batch, or an earlier group holding rows of
	// the same writers failed (publishing this one would skip theirs).
	poisoned error
	// done is closed when the group's commit has ended, err and version
	// set.
	done    chan struct{}
	err     error
	version int64
	// unknown: its own commit's answer was lost (not a group poisoned by
	// one whose was), so nothing confirms its rows without seq: they may
	// be published, and are neither acked nor to be resent.
	unknown bool
}

func newGroup() *group {
	return &group{
		key:     writers.AutoKey("group-" + rand.Text()),
		seqAt:   map[string]int{},
		members: map[*Stream]int64{},
		unseq:   map[*Stream]int64{},
		done:    make(chan struct{}),
		version: writers.NoVersion,
	}
}

// New starts the committer's loop; Close stops it. It is ErrWrongState
// when the endpoint's sink does not take continuous streams.
func New(opts Options) (*Committer, error) {
	sc, ok := writers.Find[writers.SeqCommitter](opts.Writer)
	if !ok {
		return nil, writers.Errorf(writers.ErrWrongState, "endpoint %q: its sink does not take continuous streams", opts.Endpoint)
	}
	if err := opts.Config.Validate(); err != nil {
		return nil, writers.Errorf(writers.ErrInvalid, "endpoint %q: stream: %v", opts.Endpoint, err)
	}
	if opts.Metrics == nil {
		opts.Metrics, _ = NewMetrics(nil)
	}
	c := &Committer{
		endpoint: opts.Endpoint,
		w:        opts.Writer,
		sc:       sc,
		cfg:      opts.Config,
		m:        opts.Metrics.forEndpoint(opts.Endpoint),
		log:      cmp.Or(opts.Log, slog.New(slog.DiscardHandler)).With("endpoint", opts.Endpoint),
		timeout:  cmp.Or(opts.CommitTimeout, 2*time.Minute),
		cur:      newGroup(),
		room:     make(chan struct{}),
		streams:  map[string]*Stream{},
		writers:  map[string]*writerState{},
		kick:     make(chan struct{}, 1),
		stopc:    make(chan struct{}),
		donec:    make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.run()
	return c, nil
}

// Stop begins Close without waiting: new streams are refused and the
// last group commit starts. Stopping every endpoint first lets their last
// commits run at once. Stop is idempotent.
func (c *Committer) Stop() {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		close(c.stopc)
	})
}

// Close refuses new streams, publishes what the open ones wrote in a last
// group commit (their clients get its durable answers), then ends them
// with Unavailable (the server is stopping: a client resumes elsewhere or
// later) and stops the loop. Writes after the last group was swapped out
// fail with Unavailable too. ctx bounds the wait for that commit. Close
// is idempotent.
func (c *Committer) Close(ctx context.Context) error {
	c.Stop()
	var err error
	select {
	case <-c.donec:
	case <-ctx.Done():
		c.cancel() // the last commit's sink calls end
		<-c.donec
		err = fmt.Errorf("groupcommit: endpoint %q: the last group commit did not end in time: %w", c.endpoint, ctx.Err())
	}
	c.cancel()
	c.mu.Lock()
	for _, s := range c.streams {
		s.failLocked(c.stoppingErr())
	}
	c.mu.Unlock()
	return err
}

// errStopping marks the errors of a stopping server.
var errStopping = errors.New("the server is stopping")

// Stopping reports whether err comes from the committer stopping: the
// stream's last rows may still be answered (Take) before its end.
func Stopping(err error) bool { return errors.Is(err, errStopping) }

// stoppingErr is what streams end with once the server stopped, their
// rows committed (a stream whose last group failed ends with that
// failure instead).
func (c *Committer) stoppingErr() error {
	return fmt.Errorf("endpoint %q: %w (what this stream sent before was committed): reconnect and resume from the durable seq: %w", c.endpoint, errStopping, writers.ErrUnavailable)
}

// refusedErr is what a Write after the last group was swapped out fails
// with: its batch was not taken.
func (c *Committer) refusedErr() error {
	return fmt.Errorf("endpoint %q: %w: this batch was not taken: reconnect and resume from the durable seq: %w", c.endpoint, errStopping, writers.ErrUnavailable)
}

// run commits every interval, and at once when a group is full, until
// Close; then it commits what is left.
func (c *Committer) run() {
	defer close(c.donec)
	tick := time.NewTicker(c.cfg.CommitInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.stopc:
			c.commitNext(true)
			return
		case <-tick.C:
		case <-c.kick:
		}
		c.commitNext(false)
	}
}

// kickNow asks the loop for a commit now.
func (c *Committer) kickNow() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// waitUntil calls done under c.mu, again each time the groups change
// (wakeLocked), until it answers true (with its error) or ctx ends.
func (c *Committer) waitUntil(ctx context.Context, done func() (bool, error)) error {
	for {
		c.mu.Lock()
		ok, err := done()
		room := c.room
		c.mu.Unlock()
		if ok {
			return err
		}
		select {
		case <-room:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// nextAloneLocked makes the first lonely stream alone in the current
// group when it is fresh and nobody is alone. The caller holds writeMu
// and mu.
func (c *Committer) nextAloneLocked() {
	// A failed stream would only waste its turn: it leaves on waking.
	if n := len(c.lonely); n > 0 {
		if c.lonely = slices.DeleteFunc(c.lonely, func(s *Stream) bool { return s.err != nil }); len(c.lonely) < n {
			c.wakeLocked()
		}
	}
	if c.alone != nil || len(c.lonely) == 0 || len(c.cur.members) > 0 {
		return
	}
	c.alone, c.lonely = c.lonely[0], c.lonely[1:]
	c.wakeLocked()
}

// wakeLocked lets Writes waiting for room look again.
func (c *Committer) wakeLocked() {
	close(c.room)
	c.room = make(chan struct{})
}

// commitNext swaps the current group for a fresh one and publishes it,
// unless nothing was written to it. The last one (Close) leaves the
// committer stopped: later Writes fail.
func (c *Committer) commitNext(last bool) {
	c.writeMu.Lock()
	c.mu.Lock()
	g := c.cur
	c.stopped = last
	if len(g.members) == 0 {
		c.nextAloneLocked()
		c.mu.Unlock()
		c.writeMu.Unlock()
		return
	}
	c.cur = newGroup()
	c.committing = true
	c.nextAloneLocked()
	c.wakeLocked()
	c.mu.Unlock()
	c.writeMu.Unlock()

	start := time.Now()
	info, err := c.publish(g)
	c.m.seconds.Observe(time.Since(start).Seconds())
	c.finish(g, info, err)
}

// publish precommits and commits g. A commit whose outcome is unknown is
// tried again (the seqs make a retry of a commit that landed a replay);
// any other failure rolls g back.
func (c *Committer) publish(g *group) (info writers.CommitInfo, err error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	defer cancel()
	dispatched := false
	defer func() {
		// A panic once the commit was dispatched (in CommitSeqs, or in
		// settleUnknown's reads) leaves its outcome unknown.
		var pe *writers.PanicError
		if dispatched && errors.As(err, &pe) {
			g.unknown = true
		}
	}()
	defer writers.Recover(&err)
	rollback := func(cause error) (writers.CommitInfo, error) {
		if rerr := c.w.Rollback(ctx, g.key); rerr != nil {
			c.log.Warn("rollback of a failed group commit failed; the sink may keep its staged files until vacuum", "err", rerr)
		}
		return writers.CommitInfo{}, cause
	}
	if g.poisoned != nil {
		return rollback(g.poisoned)
	}
	desc, err := c.w.Precommit(ctx, g.key)
	if err != nil {
		return rollback(fmt.Errorf("precommit: %w", err))
	}
	dispatched = true
	for try := 0; ; try++ {
		info, err = c.sc.CommitSeqs(ctx, g.key, []writers.Descriptor{desc}, g.seqs)
		switch {
		case err == nil:
			return info, nil
		case !errors.Is(err, writers.ErrOutcomeUnknown):
			return rollback(fmt.Errorf("commit: %w", err))
		case try == unknownRetries || len(g.unseq) > 0:
			// Rows without seq have no replay check: a first commit
			// landing late (an object store's lost answer) and a retry
			// would both publish them, or the retry answer Replayed
			// and have them resent.
			return c.settleUnknown(ctx, g, err)
		}
		c.log.Warn("group commit outcome unknown; trying again", "try", try+1, "err", err)
		select {
		case <-time.After(unknownBackoff << try):
		case <-ctx.Done():
			g.unknown = true
			return writers.CommitInfo{}, fmt.Errorf("commit: %w", err)
		}
	}
}

// settleUnknown decides a group commit whose outcome stayed unknown
// after every retry: when the group has seqs, the sink tells whether it
// landed (one commit records them all: every writer recorded at its last
// seq or later means published; any below means not, and the group is
// rolled back); without, nothing tells, and the group is neither rolled
// back (it may have been published) nor acknowledged.
func (c *Committer) settleUnknown(ctx context.Context, g *group, cause error) (writers.CommitInfo, error) {
	g.unknown = true
	cause = fmt.Errorf("commit: %w", cause)
	if len(g.seqs) == 0 {
		return writers.CommitInfo{}, cause
	}
	for _, s := range g.seqs {
		seq, ok, err := c.w.CommittedEpoch(ctx, s.Writer)
		if err != nil {
			return writers.CommitInfo{}, cause
		}
		if !ok || seq < s.Last {
			// Read right after the lost answer, the seqs say little of a
			// put the store may still be writing: rows with seqs resume
			// safely (a late landing records their seqs), rows without
			// stay unknown.
			if rerr := c.w.Rollback(ctx, g.key); rerr != nil {
				c.log.Warn("rollback of a group commit that did not land failed", "err", rerr)
			}
			return writers.CommitInfo{}, cause
		}
	}
	c.log.Info("group commit outcome was unknown; the sink records all its seqs: it landed", "writers", len(g.seqs))
	return writers.CommitInfo{Version: writers.NoVersion, Replayed: true}, nil
}

// finish records how g's commit ended: the writers' durable seqs and the
// acks of its streams, or, when it failed, the failure of its streams.
func (c *Committer) finish(g *group, info writers.CommitInfo, err error) {
	now := time.Now()
	c.mu.Lock()
	g.err, g.version = err, info.Version
	for _, s := range g.seqs {
		ws := c.writers[s.Writer]
		if err == nil {
			ws.durable = s.Last
		}
	}
	if err != nil {
		c.failGroupLocked(g, err)
	} else {
		for s, rows := range g.members {
			if info.Replayed && g.unseq[s] > 0 {
				if g.unknown { // whether by this commit or an earlier one, nothing tells
					s.failLocked(c.unseqUnknown(g, s, true))
					continue
				}
				// A replay publishes nothing: the seqs were recorded by
				// an earlier attempt, or by another server, whose commit
				// holds none of these rows without seq.
				s.failLocked(writers.Errorf(writers.ErrUnavailable, "endpoint %q: %d rows this stream sent without seq may not have been published (their group commit found its seqs already recorded): send them again", c.endpoint, g.unseq[s]))
				continue
			}
			if rows == 0 && !slices.ContainsFunc(g.seqs, func(ws writers.WriterSeq) bool { return ws.Writer == s.writer }) {
				continue // nothing of s became durable (an empty batch without seq): no answer
			}
			s.durableLocked(g, rows, c.writers[s.writer])
		}
	}
	for writer, ws := range c.writers {
		if ws.last == g {
			ws.last = nil
			c.forgetLocked(writer)
		}
	}
	c.committing = false
	c.wakeLocked()
	full := c.cur.bytes >= c.cfg.CommitBytes
	c.mu.Unlock()
	close(g.done)

	result := "committed"
	switch {
	case err != nil:
		result = "failed"
		c.log.Warn("group commit failed; its streams are failed and resume from their durable seqs", "rows", g.rows, "streams", len(g.members), "err", err)
	case info.Replayed:
		result = "replayed"
	}
	c.m.commits.WithLabelValues(result).Inc()
	if err == nil {
		c.m.rows.Observe(float64(g.rows))
		c.m.bytes.Observe(float64(g.bytes))
		c.m.streams.Observe(float64(len(g.members)))
		for _, t := range g.written {
			c.m.ack.Observe(now.Sub(t).Seconds())
		}
	}
	if full {
		c.kickNow()
	}
}

// failGroupLocked fails the streams of g, which will not be published,
// and poisons the current group when it holds rows of g's writers:
// publishing those would make a seq durable while earlier ones were lost.
func (c *Committer) failGroupLocked(g *group, err error) {
	cause := writers.Errorf(writers.ErrUnavailable, "endpoint %q: the group commit holding this stream's rows failed (%v): reconnect and resume from the durable seq", c.endpoint, err)
	affected := map[string]bool{}
	for s := range g.members {
		affected[s.writer] = true
		s.lost = true
		if g.unseq[s] > 0 && g.unknown {
			s.failLocked(c.unseqUnknown(g, s, false))
			continue
		}
		s.failLocked(cause)
	}
	for s := range c.cur.members {
		if affected[s.writer] && c.cur.poisoned == nil {
			c.cur.poisoned = fmt.Errorf("an earlier group commit holding rows of writer %q failed: %v", s.writer, err)
		}
	}
}

// unseqUnknown is the failure of stream s whose rows without seq in g
// may or may not have been published: resending them could duplicate
// them, so the class stays an unknown outcome. When g's seqs showed it
// landed (later), rows the stream sent without seq after them, staged in
// the next group, are published too, unacked; when g failed, the next
// group holding them is poisoned and they were not.
func (c *Committer) unseqUnknown(g *group, s *Stream, later bool) error {
	which := fmt.Sprintf("%d rows this stream sent without seq", g.unseq[s])
	if later {
		which = fmt.Sprintf("%d rows this stream sent without seq, and those it sent without seq after them,", g.unseq[s])
	}
	return fmt.Errorf("endpoint %q: %s may have been published (%w: their group commit's answer was lost): check the table before sending them again; rows with seqs resume from the durable seq", c.endpoint, which, writers.ErrOutcomeUnknown)
}

// forgetLocked drops writer's state once it has no open stream and no
// rows waiting: writer names come and go with clients, and a later stream
// of the writer reads its durable seq from the sink again.
func (c *Committer) forgetLocked(writer string) {
	if ws := c.writers[writer]; ws != nil && ws.last == nil && c.streams[writer] == nil {
		delete(c.writers, writer)
	}
}

// writerLocked returns writer's state, made on first use.
func (c *Committer) writerLocked(writer string) *writerState {
	ws := c.writers[writer]
	if ws == nil {
		ws = &writerState{durable: -1}
		c.writers[writer] = ws
	}
	return ws
}

// durable reads the durable seq of s's writer from the sink (-1: none):
// at every open, since another server may have committed seqs of the
// writer since this one last did. A stream fenced meanwhile records
// nothing: the newer stream's state is newer.
func (c *Committer) durable(ctx context.Context, s *Stream) (int64, error) {
	seq, ok, err := c.w.CommittedEpoch(ctx, s.writer)
	if err != nil {
		return 0, fmt.Errorf("endpoint %q: read the durable seq of writer %q: %w", c.endpoint, s.writer, err)
	}
	if !ok {
		seq = NoSeq
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !s.gone {
		c.writerLocked(s.writer).durable = seq
	}
	return seq, nil
}

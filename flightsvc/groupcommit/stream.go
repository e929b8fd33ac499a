package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
)

// NoSeq is a seq that is none: the durable seq of a writer that never
// committed one, and the seq of a batch sent without one.
const NoSeq int64 = -1

// Ack is what a stream learns when a group commit makes its rows durable.
type Ack struct {
	// DurableSeq is the writer's last committed seq, NoSeq when none.
	DurableSeq int64
	// Version is the table version of the last commit that held rows of
	// the stream (writers.NoVersion: none, or a sink without versions).
	Version int64
	// Rows counts the stream's rows made durable since the last Ack.
	Rows int64
}

// Stream is one continuous stream of a writer. Write and Close are called
// by one goroutine; Ready and Take by one goroutine (the same or another).
type Stream struct {
	c      *Committer
	writer string
	// open is the writer's durable seq when the stream opened: batches at
	// or below it are replays. last is the seq of the stream's last batch.
	// Both are the writing goroutine's.
	open, last int64

	// The fields below are guarded by c.mu.

	// err ends the stream: fenced by a newer stream of the writer, a
	// failed group commit, the server stopping.
	err error
	// lost: a group commit holding rows of the stream failed
	// (failGroupLocked). A batch the sink was writing meanwhile is in the
	// current group, which failGroupLocked could not see it in: stage
	// poisons the group then, or publishing it would make the batch's seq
	// durable past the lost ones.
	lost bool
	// gone: no longer the writer's open stream.
	gone bool
	// ack accumulates what Take has not returned yet; pending says there
	// is some.
	ack     Ack
	pending bool
	// lastGroup is the newest group holding rows of the stream.
	lastGroup *group
	// waiting is when the oldest of the stream's rows not yet durable was
	// written (zero: none), for the status page.
	waiting time.Time
	// ready has room for one signal: an ack or an error to take.
	ready chan struct{}
}

// Open opens a stream of writer and returns it with the writer's durable
// seq (NoSeq when the writer never committed one). An open stream of the
// same writer is fenced: its Write and Take fail with ErrConflict. Open
// waits until the rows an earlier stream of the writer left in groups not
// yet committed are (at most about two commit intervals), so that the
// durable seq it answers is where the client resumes.
func (c *Committer) Open(ctx context.Context, writer string) (*Stream, int64, error) {
	s := &Stream{c: c, writer: writer, open: NoSeq, last: NoSeq, ready: make(chan struct{}, 1)}
	s.ack = Ack{DurableSeq: NoSeq, Version: writers.NoVersion}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, NoSeq, writers.Errorf(writers.ErrUnavailable, "endpoint %q: the server is stopping: reconnect", c.endpoint)
	}
	if old := c.streams[writer]; old != nil {
		old.failLocked(writers.Errorf(writers.ErrConflict, "endpoint %q: another stream of writer %q opened: this one is fenced", c.endpoint, writer))
		old.goneLocked()
	}
	c.streams[writer] = s
	c.m.open.Inc()
	c.mu.Unlock()

	// A Write of a fenced stream that was under way has ended once the
	// lock is ours; later ones see the fence.
	c.writeMu.Lock()
	//lint:ignore SA2001 a barrier, not a critical section
	c.writeMu.Unlock()
	c.mu.Lock()
	var last *group
	if ws := c.writers[writer]; ws != nil {
		last = ws.last
	}
	c.mu.Unlock()
	if last != nil {
		select {
		case <-last.done:
		case <-ctx.Done():
			s.Abandon()
			return nil, NoSeq, context.Cause(ctx)
		}
	}
	d, err := c.durable(ctx, s)
	if err != nil {
		s.Abandon()
		return nil, NoSeq, err
	}
	c.mu.Lock()
	s.open, s.last, s.ack.DurableSeq = d, d, d
	c.mu.Unlock()
	return s, d, nil
}

// Write stages rec, the stream's next batch, in the current group. seq is
// the batch's seq or NoSeq. A batch whose seq is at or below the durable
// seq the stream opened with is a replay: it is dropped (dropped is true)
// and nothing is written, while the stream has sent no newer seq; after
// one, a seq not above the stream's previous one is ErrInvalid. Write
// blocks while the current group holds commit_bytes and the previous one
// is still being committed (backpressure); size is rec's size counted for
// that.
//
// A sink Write failing with ErrInvalid staged nothing: when other streams
// wrote to the group, the refusal may be the group's (another stream's
// schema admitted first), so the batch is tried once more alone in a
// fresh group; refused again, it fails this stream only. Any other
// failure fails the group, and so every stream that wrote to it.
func (s *Stream) Write(ctx context.Context, rec arrow.RecordBatch, seq, size int64) (dropped bool, err error) {
	if seq != NoSeq {
		if seq < 0 {
			return false, writers.Errorf(writers.ErrInvalid, "seq %d: a seq is an integer >= 0", seq)
		}
		if seq <= s.last && s.last > s.open {
			return false, writers.Errorf(writers.ErrInvalid, "seq %d follows seq %d: a writer's seqs must increase", seq, s.last)
		}
		if seq <= s.open {
			return true, nil // a replay, before any new seq of the stream
		}
	}
	if err := s.waitRoom(ctx); err != nil {
		return false, err
	}
	shared, err := s.stage(ctx, rec, seq, size)
	if err != nil && shared && errors.Is(err, writers.ErrInvalid) {
		defer s.leaveAlone()
		if err := s.waitSwap(ctx); err != nil {
			return false, err
		}
		_, err = s.stage(ctx, rec, seq, size)
	}
	return false, err
}

// leaveAlone gives the group s had to itself back to every stream, or
// leaves the line of lonely streams. The group being fresh still when s
// wrote nothing, the next in line may have it at once; else it needs a
// swap.
func (s *Stream) leaveAlone() {
	c := s.c
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lonely = slices.DeleteFunc(c.lonely, func(o *Stream) bool { return o == s })
	if c.alone == s {
		c.alone = nil
		c.wakeLocked()
	}
	c.nextAloneLocked()
	if len(c.lonely) > 0 {
		c.kickNow()
	}
}

// stage writes rec into the current group and records it there, once no
// other stream has the group to itself. shared is whether other streams
// had written to the group.
func (s *Stream) stage(ctx context.Context, rec arrow.RecordBatch, seq, size int64) (shared bool, err error) {
	c := s.c
	for {
		if err := s.waitOthersAlone(ctx); err != nil {
			return false, err
		}
		c.writeMu.Lock()
		c.mu.Lock()
		if c.alone == nil || c.alone == s || s.err != nil || c.stopped {
			break
		}
		// Taken between the wait and the locks: wait again.
		c.mu.Unlock()
		c.writeMu.Unlock()
	}
	defer c.writeMu.Unlock()
	switch {
	case s.err != nil:
		err = s.err
	case c.stopped:
		err = c.refusedErr()
	}
	g := c.cur
	_, mine := g.members[s]
	shared = len(g.members) > 1 || len(g.members) == 1 && !mine
	c.mu.Unlock()
	if err != nil {
		return shared, err
	}

	// Not the stream's context: a client leaving in the middle of a Write
	// must not leave half a batch staged in a group other streams share.
	werr := func() (err error) {
		defer writers.Recover(&err)
		return c.w.Write(c.ctx, g.key, rec)
	}()
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if werr == nil && s.lost {
		if g.poisoned == nil {
			g.poisoned = fmt.Errorf("a group commit holding earlier rows of writer %q failed while it wrote into this one: %w", s.writer, s.err)
		}
		g.members[s] += 0 // its stream fails with the group
		return shared, s.err
	}
	if werr != nil {
		if !errors.Is(werr, writers.ErrInvalid) && g.poisoned == nil {
			g.poisoned = fmt.Errorf("a sink write of writer %q failed: %w", s.writer, werr)
			g.members[s] += 0 // its stream fails with the group
		}
		return shared, werr
	}
	rows := rec.NumRows()
	g.members[s] += rows
	g.rows += rows
	g.bytes += size
	g.written = append(g.written, now)
	if seq == NoSeq {
		if rows > 0 {
			g.unseq[s] += rows
		}
	} else {
		if i, ok := g.seqAt[s.writer]; ok {
			g.seqs[i].Last = seq
		} else {
			g.seqAt[s.writer] = len(g.seqs)
			g.seqs = append(g.seqs, writers.WriterSeq{Writer: s.writer, First: seq, Last: seq})
		}
		s.last = seq
	}
	c.writerLocked(s.writer).last = g
	s.lastGroup = g
	if s.waiting.IsZero() {
		s.waiting = now
	}
	if g.bytes >= c.cfg.CommitBytes {
		c.kickNow()
	}
	return shared, nil
}

// waitOthersAlone returns once no other stream has the group to itself
// (or s failed, or the committer stopped, or ctx ended).
func (s *Stream) waitOthersAlone(ctx context.Context) error {
	c := s.c
	return c.waitUntil(ctx, func() (bool, error) {
		return c.alone == nil || c.alone == s || s.err != nil || c.stopped, nil
	})
}

// waitSwap waits until s is alone in a fresh group (or the stream
// failed, or the committer stopped, or ctx ended): it joins the lonely
// streams and asks for a commit now, whose swap of groups makes the first
// of them alone. Other streams write on until then: a refused batch holds
// them back for its own Write only, not for a commit under way. The
// caller leaves (leaveAlone).
func (s *Stream) waitSwap(ctx context.Context) error {
	c := s.c
	// writeMu too: a Write under way into the current group has not
	// counted itself among its members yet.
	c.writeMu.Lock()
	c.mu.Lock()
	c.lonely = append(c.lonely, s)
	c.nextAloneLocked()
	c.mu.Unlock()
	c.writeMu.Unlock()
	return c.waitUntil(ctx, func() (bool, error) {
		switch {
		case s.err != nil:
			return true, s.err
		case c.alone == s || c.stopped:
			return true, nil // stage refuses the batch when stopped
		}
		c.kickNow()
		return false, nil
	})
}

// waitRoom returns once the current group has room, the stream has
// failed or ctx has ended. A full group not being committed is committed
// at once.
func (s *Stream) waitRoom(ctx context.Context) error {
	c := s.c
	return c.waitUntil(ctx, func() (bool, error) {
		switch {
		case s.err != nil:
			return true, s.err
		case c.cur.bytes < c.cfg.CommitBytes:
			return true, nil
		case !c.committing:
			c.kickNow()
		}
		return false, nil
	})
}

// Ready signals that Take has an ack or an error to return.
func (s *Stream) Ready() <-chan struct{} { return s.ready }

// Take returns the ack accumulated since the last Take (ok false: none),
// then the error that ended the stream.
func (s *Stream) Take() (ack Ack, ok bool, err error) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.pending {
		// Acks first: rows made durable are answered even when the
		// stream ended meanwhile (the server stopping after its last
		// commit); the error is signalled again for the next Take.
		if s.err != nil {
			s.signalLocked()
		}
		return s.takeLocked()
	}
	if s.err != nil {
		return Ack{}, false, s.err
	}
	return s.takeLocked()
}

func (s *Stream) takeLocked() (Ack, bool, error) {
	ack, ok := s.ack, s.pending
	s.ack.Rows, s.pending = 0, false
	return ack, ok, nil
}

// Close ends a stream whose client ended it: it waits until the rows the
// stream wrote are durable (ctx bounds the wait) and returns the last
// ack, or the error that failed them.
func (s *Stream) Close(ctx context.Context) (Ack, error) {
	c := s.c
	c.mu.Lock()
	g := s.lastGroup
	c.mu.Unlock()
	if g != nil {
		select {
		case <-g.done:
		case <-ctx.Done():
			s.Abandon()
			return Ack{}, context.Cause(ctx)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s.goneLocked()
	// A server stopping after its last commit published the stream's rows
	// has not failed them.
	if s.err != nil && !(errors.Is(s.err, errStopping) && (g == nil || g.err == nil)) {
		return Ack{}, s.err
	}
	ack, _, _ := s.takeLocked()
	return ack, nil
}

// Abandon ends a stream that failed or whose client left: the rows it
// wrote stay in their groups and are committed.
func (s *Stream) Abandon() {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.goneLocked()
}

// goneLocked unregisters s as its writer's open stream.
func (s *Stream) goneLocked() {
	if s.gone {
		return
	}
	s.gone = true
	if s.c.streams[s.writer] == s {
		delete(s.c.streams, s.writer)
		s.c.forgetLocked(s.writer)
	}
	s.c.m.open.Dec()
}

// failLocked ends s with err (the first error wins) and signals it.
func (s *Stream) failLocked(err error) {
	if s.err == nil {
		s.err = err
	}
	s.signalLocked()
}

// durableLocked records that g's commit made rows of s durable.
func (s *Stream) durableLocked(g *group, rows int64, ws *writerState) {
	s.ack.Rows += rows
	s.ack.Version = g.version
	s.ack.DurableSeq = ws.durable
	s.pending = true
	if s.lastGroup == g {
		s.waiting = time.Time{}
	} else if !s.waiting.IsZero() {
		s.waiting = time.Now() // its rows of the next group: since about now
	}
	s.signalLocked()
}

// StreamStatus describes one open stream, for the status page.
type StreamStatus struct {
	Writer string
	// DurableSeq and LastSeq are the writer's durable seq and the seq of
	// the stream's last batch (NoSeq: none).
	DurableSeq, LastSeq int64
	// Lag is how long the stream's oldest rows not yet durable have
	// waited; zero when all are.
	Lag time.Duration
}

// Streams describes the open streams, by writer.
func (c *Committer) Streams() []StreamStatus {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]StreamStatus, 0, len(c.streams))
	for _, s := range c.streams {
		st := StreamStatus{Writer: s.writer, DurableSeq: c.writerLocked(s.writer).durable, LastSeq: s.last}
		if !s.waiting.IsZero() {
			st.Lag = now.Sub(s.waiting)
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b StreamStatus) int { return strings.Compare(a.Writer, b.Writer) })
	return out
}

func (s *Stream) signalLocked() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

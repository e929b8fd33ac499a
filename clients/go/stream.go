package quiver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/util"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultMaxInflightBytes is the default bound on the bytes a [Stream]
// retains (written, not yet durable) before Write blocks.
const DefaultMaxInflightBytes = 64 << 20

// Default reconnection backoff of a [Stream]: it doubles from the first to
// the cap, with jitter, and starts over once a connection has opened.
const (
	DefaultReconnectMin = 100 * time.Millisecond
	DefaultReconnectMax = 5 * time.Second
)

// StreamOption configures [Client.Stream].
type StreamOption func(*streamConfig)

type streamConfig struct {
	schema       *arrow.Schema
	maxInflight  int64
	onDurable    func(seq int64)
	onReconnect  func(err error, pause time.Duration)
	backoffFirst time.Duration
	backoffCap   time.Duration
}

// WithStreamSchema opens the stream in [Client.Stream] itself, with
// schema, and waits for the server's opening answer, so that
// [Stream.Durable] tells where the writer stands before the first Write.
// Without it the stream opens at the first Write, with that batch's
// schema.
func WithStreamSchema(schema *arrow.Schema) StreamOption {
	return func(c *streamConfig) { c.schema = schema }
}

// WithMaxInflightBytes bounds the bytes of the batches a Stream retains
// (written, not yet durable): Write blocks while one more batch would pass
// it. The default is [DefaultMaxInflightBytes].
func WithMaxInflightBytes(n int64) StreamOption {
	return func(c *streamConfig) { c.maxInflight = n }
}

// WithOnDurable calls fn with the stream's durable seq each time a commit
// makes more of its batches durable, in increasing order, one call at a
// time from the Stream's own goroutines: fn must return quickly, and must
// not call Write, Flush or Close (they may wait for the goroutine running
// fn).
func WithOnDurable(fn func(seq int64)) StreamOption {
	return func(c *streamConfig) { c.onDurable = fn }
}

// WithOnReconnect calls fn each time a connection of the stream failed
// with Unavailable, with its error and the pause before the next one (to
// log it: a stream reconnects without telling its caller otherwise), on
// the Stream's own goroutine: fn must return quickly.
func WithOnReconnect(fn func(err error, pause time.Duration)) StreamOption {
	return func(c *streamConfig) { c.onReconnect = fn }
}

// WithReconnectBackoff sets the pause before reconnecting: first, doubling
// up to limit. The defaults are [DefaultReconnectMin] and
// [DefaultReconnectMax].
func WithReconnectBackoff(first, limit time.Duration) StreamOption {
	return func(c *streamConfig) { c.backoffFirst, c.backoffCap = first, limit }
}

// Stream is one writer's continuous stream to an endpoint
// (docs/clients.md, "Continuous streams"): a long-lived DoPut whose
// batches the server commits every commit interval, together with the
// endpoint's other streams, and acknowledges as durable.
//
// Every batch gets a seq, consecutive from the writer's durable seq + 1
// (0 for a writer that never committed). The Stream retains each batch
// until a commit makes it durable. When the connection fails with
// Unavailable (server restarting, storage failing, network), it reconnects
// with backoff; the server's opening answer says which seq is durable, the
// Stream drops the batches up to it and sends the rest again, in order,
// and the server drops any it already committed. So every batch lands
// exactly once, as long as one Stream at a time writes as the writer:
// opening a stream fences (Aborted) the writer's earlier one.
//
// Aborted, FailedPrecondition (the writer is used for transactions, or the
// sink has no streams), InvalidArgument and any other error but
// Unavailable end the Stream: Write, Flush and Close return it from then
// on, keeping its gRPC status.
//
// Write, Flush and Close are for one goroutine at a time; Durable and
// Version may be called from any.
type Stream struct {
	c                *Client
	endpoint, writer string
	cfg              streamConfig
	desc             *flight.FlightDescriptor

	// ctx is every connection's context: cancelling it (its cause says
	// why) aborts the stream.
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when run returns

	mu      sync.Mutex    // guards the fields below
	changed chan struct{} // closed and replaced whenever they change
	schema  *arrow.Schema // nil until the stream starts
	opened  bool          // an opening answer came: nextSeq is known
	wrote   bool          // a Write was accepted: seqs are taken
	closing bool          // Close was called: end the stream once all is sent
	ended   bool          // run returned
	err     error         // why run ended, nil for a clean close
	lastErr error         // the last connection's error while reconnecting
	// buf holds the written batches not known durable, seqs
	// [nextSeq-len(buf), nextSeq).
	buf      []pending
	inflight int64 // bytes of buf's batches
	nextSeq  int64
	durable  int64 // -1: none
	version  int64
	versions bool // version was announced
}

// pending is a written batch the Stream retains until it is durable.
type pending struct {
	seq  int64
	rec  arrow.RecordBatch
	size int64
}

// Stream returns writer's continuous stream to endpoint. Without
// [WithStreamSchema] it does not call the server: the first Write opens
// the stream. ctx bounds only the opening; its values (gRPC metadata) go
// with every connection the Stream makes. Close the Stream when done: its
// connection lives until then.
func (c *Client) Stream(ctx context.Context, endpoint, writer string, opts ...StreamOption) (*Stream, error) {
	cfg := streamConfig{maxInflight: DefaultMaxInflightBytes, backoffFirst: DefaultReconnectMin, backoffCap: DefaultReconnectMax}
	for _, opt := range opts {
		opt(&cfg)
	}
	switch {
	case endpoint == "" || writer == "":
		return nil, fmt.Errorf("quiver: stream %q to %q: the endpoint and the writer must not be empty", writer, endpoint)
	case cfg.maxInflight <= 0:
		return nil, fmt.Errorf("quiver: stream %q to %q: max in-flight bytes %d must be positive", writer, endpoint, cfg.maxInflight)
	case cfg.backoffFirst <= 0 || cfg.backoffCap < cfg.backoffFirst:
		return nil, fmt.Errorf("quiver: stream %q to %q: reconnect backoff %v..%v must be positive and growing", writer, endpoint, cfg.backoffFirst, cfg.backoffCap)
	}
	cmd, err := json.Marshal(struct {
		Endpoint string `json:"endpoint"`
		Writer   string `json:"writer"`
		Stream   bool   `json:"stream"`
	}{endpoint, writer, true})
	if err != nil {
		return nil, fmt.Errorf("quiver: stream %q to %q: %w", writer, endpoint, err)
	}
	sctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	s := &Stream{
		c: c, endpoint: endpoint, writer: writer, cfg: cfg,
		desc: &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd},
		ctx:  sctx, cancel: cancel, done: make(chan struct{}),
		changed: make(chan struct{}), durable: -1,
	}
	if cfg.schema == nil {
		return s, nil
	}
	s.mu.Lock()
	s.start(cfg.schema)
	err = s.awaitOpen(ctx, "open")
	s.mu.Unlock()
	if err != nil {
		s.cancel(errors.New("the opening failed"))
		<-s.done
		return nil, err
	}
	return s, nil
}

// Write sends rec as the stream's next batch and returns its seq. The
// first Write opens the stream (unless [WithStreamSchema] did) and waits
// for the opening answer; every batch must have the stream's schema.
// Write blocks while the retained batches plus rec would pass the
// in-flight bound (a batch larger than the bound goes alone), within ctx.
// The Stream retains rec until it is durable; the caller keeps its own
// reference and may release it once Write returns. A nil error means rec
// is queued, not durable: see [Stream.Flush].
func (s *Stream) Write(ctx context.Context, rec arrow.RecordBatch) (seq int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || s.ended {
		return -1, s.endedErr("write")
	}
	if s.schema == nil {
		s.start(rec.Schema())
	} else if !rec.Schema().Equal(s.schema) {
		return -1, s.errorf("write: the batch's schema %v differs from the stream's %v", rec.Schema(), s.schema)
	}
	if err := s.awaitOpen(ctx, "write"); err != nil {
		return -1, err
	}
	size := util.TotalRecordSize(rec)
	if err := s.waitLocked(ctx, func() bool {
		return s.ended || s.inflight == 0 || s.inflight+size <= s.cfg.maxInflight
	}); err != nil {
		return -1, s.ctxErr("write", err)
	}
	if s.ended {
		return -1, s.endedErr("write")
	}
	rec.Retain()
	seq = s.nextSeq
	s.nextSeq++
	s.buf = append(s.buf, pending{seq: seq, rec: rec, size: size})
	s.inflight += size
	s.wrote = true
	s.broadcast()
	return seq, nil
}

// Flush waits until every batch written so far is durable, within ctx.
func (s *Stream) Flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.waitLocked(ctx, func() bool { return s.ended || len(s.buf) == 0 }); err != nil {
		return s.ctxErr("flush", err)
	}
	if s.err != nil {
		return s.err
	}
	return nil
}

// Durable returns the writer's durable seq: every batch up to it is
// committed (-1: none). After the opening it includes what earlier
// streams of the writer committed, which is where a restarted producer
// resumes.
func (s *Stream) Durable() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.durable
}

// Version returns the table version of the last commit that made batches
// of the stream durable; ok is false before one, and for sinks without
// table versions.
func (s *Stream) Version() (version int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version, s.versions
}

// Close ends the stream: it sends what is not sent yet, ends its side and
// waits for the server's closed answer, which comes once the server has
// committed the rest, so a nil error means every written batch is
// durable. If ctx ends first, Close cancels the stream and returns ctx's
// error: the server still commits the batches it received, and a new
// Stream of the writer learns from its opening how far ([Stream.Durable]).
// Either way every retained batch is released. Calling Close again returns
// the same result.
func (s *Stream) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.schema == nil {
		s.closing, s.ended = true, true
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	s.broadcast()
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-ctx.Done():
		s.mu.Lock()
		cause := s.ctxCause("close", ctx.Err())
		s.mu.Unlock()
		s.cancel(cause)
		<-s.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// start sets the schema and starts the connection loop (s.mu held).
func (s *Stream) start(schema *arrow.Schema) {
	s.schema = schema
	go s.run()
}

// awaitOpen waits until the first opening answer came or the stream ended
// (s.mu held).
func (s *Stream) awaitOpen(ctx context.Context, op string) error {
	if err := s.waitLocked(ctx, func() bool { return s.opened || s.ended }); err != nil {
		return s.ctxErr(op, err)
	}
	if s.ended {
		return s.endedErr(op)
	}
	return nil
}

// waitLocked waits until ready holds or ctx ends, releasing s.mu
// meanwhile (s.mu held). ready is evaluated with s.mu held.
func (s *Stream) waitLocked(ctx context.Context, ready func() bool) error {
	for !ready() {
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
		}
		s.mu.Lock()
		if ctx.Err() != nil && !ready() {
			return ctx.Err()
		}
	}
	return nil
}

// broadcast wakes every waiter (s.mu held).
func (s *Stream) broadcast() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Stream) errorf(format string, args ...any) error {
	return fmt.Errorf("quiver: stream %q to %q: "+format, append([]any{s.writer, s.endpoint}, args...)...)
}

// endedErr is the error of an operation on an ended or closing stream
// (s.mu held).
func (s *Stream) endedErr(op string) error {
	if s.err != nil {
		return s.err
	}
	return s.errorf("%s after Close", op)
}

// ctxErr wraps a context error of op (s.mu held).
func (s *Stream) ctxErr(op string, err error) error {
	return s.errorf("%w", s.ctxCause(op, err))
}

// ctxCause is a context error of op, with the connection error the stream
// is recovering from, if any (s.mu held).
func (s *Stream) ctxCause(op string, err error) error {
	if s.lastErr != nil {
		return fmt.Errorf("%s: %w (while reconnecting after: %v)", op, err, s.lastErr)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// run connects, and reconnects after Unavailable with backoff, until the
// stream closes or fails.
func (s *Stream) run() {
	defer close(s.done)
	pause := s.cfg.backoffFirst
	for {
		opened, err := s.connect()
		if s.ctx.Err() != nil {
			s.end(context.Cause(s.ctx))
			return
		}
		if err == nil || status.Code(err) != codes.Unavailable {
			s.end(err)
			return
		}
		if opened {
			pause = s.cfg.backoffFirst
		}
		s.mu.Lock()
		s.lastErr = err
		s.mu.Unlock()
		// Jitter spreads the reconnections of many clients of a
		// restarting server.
		wait := pause/2 + rand.N(pause/2+1)
		if s.cfg.onReconnect != nil {
			s.cfg.onReconnect(err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			s.end(context.Cause(s.ctx))
			return
		}
		pause = min(2*pause, s.cfg.backoffCap)
	}
}

// end records why the stream ended and releases every retained batch.
func (s *Stream) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.buf {
		p.rec.Release()
	}
	s.buf, s.inflight = nil, 0
	if err != nil {
		s.err = s.errorf("%w", err)
	}
	s.ended = true
	s.broadcast()
}

// connect runs one DoPut: it sends the descriptor and schema, waits for
// the opening answer, resumes from it, then sends batches as they are
// written while a second goroutine receives the answers (gRPC allows one
// of each per stream). opened tells whether the opening answer came.
func (s *Stream) connect() (opened bool, err error) {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	call, err := s.c.fc.DoPut(ctx)
	if err != nil {
		return false, err
	}
	if err := s.sendSchema(call); err != nil {
		if errors.Is(err, io.EOF) {
			// The server ended the call; Recv says why.
			_, err = call.Recv()
		}
		return false, err
	}
	res, err := call.Recv()
	if errors.Is(err, io.EOF) {
		return false, errors.New("the server ended the stream without an opening answer")
	}
	if err != nil {
		return false, err
	}
	open, err := decodeStreamAnswer(res.GetAppMetadata())
	if err != nil {
		return false, err
	}
	if err := s.resume(open); err != nil {
		return true, err
	}

	recvDone := make(chan error, 1)
	go func() {
		err := s.receive(call)
		if err != nil {
			// Unblocks the sender, waiting for batches or on flow control.
			cancel()
		}
		recvDone <- err
	}()
	sendErr := s.send(ctx, call)
	// io.EOF from Send means the server ended the call; Recv has its
	// reason. Other send errors leave the server waiting: cancel.
	sendFailed := sendErr != nil && !errors.Is(sendErr, io.EOF)
	if sendFailed {
		cancel()
	}
	recvErr := <-recvDone
	switch {
	case recvErr != nil && !(sendFailed && status.Code(recvErr) == codes.Canceled):
		return true, recvErr
	case sendFailed:
		return true, sendErr
	case sendErr != nil:
		return true, errors.New("the server ended the stream before the client ended its side, without an error")
	}
	return true, nil
}

// sendSchema sends the first message: the descriptor and the schema, which
// the server answers with the opening answer.
func (s *Stream) sendSchema(call flight.FlightService_DoPutClient) error {
	p := ipc.GetSchemaPayload(s.schema, s.c.mem)
	defer p.Release()
	meta := p.Meta()
	defer meta.Release()
	return call.Send(&flight.FlightData{FlightDescriptor: s.desc, DataHeader: meta.Bytes()})
}

// send sends the retained batches not sent on this connection, then each
// batch as it is written, and ends the client's side once Close was called
// and everything is sent.
func (s *Stream) send(ctx context.Context, call flight.FlightService_DoPutClient) error {
	pw := &wireWriter{call: call}
	w := ipc.NewWriterWithPayloadWriter(pw, ipc.WithSchema(s.schema), ipc.WithAllocator(s.c.mem))
	defer w.Close() // releases the dictionaries it remembers; it sends nothing
	s.mu.Lock()
	next := s.nextSeq - int64(len(s.buf))
	s.mu.Unlock()
	for {
		p, ok, err := s.nextToSend(ctx, next)
		if err != nil {
			return err
		}
		if !ok {
			return call.CloseSend()
		}
		pw.meta = fmt.Appendf(pw.meta[:0], `{"seq":%d}`, p.seq)
		err = w.Write(p.rec)
		p.rec.Release()
		if err != nil {
			return err
		}
		next = p.seq + 1
	}
}

// nextToSend waits for the batch with seq next (or the first retained
// after it) and returns it retained for the caller; ok is false once the
// stream is closing and everything is sent.
func (s *Stream) nextToSend(ctx context.Context, next int64) (p pending, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.waitLocked(ctx, func() bool { return next < s.nextSeq || s.closing }); err != nil {
		return pending{}, false, err
	}
	if next >= s.nextSeq {
		return pending{}, false, nil
	}
	first := s.nextSeq - int64(len(s.buf))
	p = s.buf[max(next-first, 0)]
	p.rec.Retain()
	return p, true, nil
}

// receive reads the server's durability answers until the closed answer
// and the end of the call.
func (s *Stream) receive(call flight.FlightService_DoPutClient) error {
	closed := false
	for {
		res, err := call.Recv()
		if errors.Is(err, io.EOF) {
			if !closed {
				return errors.New("the server ended the stream without the closed answer")
			}
			return nil
		}
		if err != nil {
			return err
		}
		a, err := decodeStreamAnswer(res.GetAppMetadata())
		if err != nil {
			return err
		}
		if a.DurableSeq != nil {
			if err := s.markDurable(*a.DurableSeq, a.Version); err != nil {
				return err
			}
		}
		if a.Closed {
			closed = true
			if err := s.checkAllDurable(); err != nil {
				return err
			}
		}
	}
}

// resume applies an opening answer: the first fixes where seqs start; a
// later one drops the batches it says are durable, so that send resends
// only the rest.
func (s *Stream) resume(a streamAnswer) error {
	seq := int64(-1)
	if a.DurableSeq != nil {
		seq = *a.DurableSeq
	}
	s.mu.Lock()
	if !s.wrote {
		// Nothing written yet: seqs start after whatever the writer has
		// durable now.
		s.durable, s.nextSeq, s.opened, s.lastErr = seq, seq+1, true, nil
		s.broadcast()
		s.mu.Unlock()
		return nil
	}
	s.lastErr = nil
	s.mu.Unlock()
	return s.markDurable(seq, nil)
}

// markDurable records that every seq up to seq is durable, releases those
// batches and calls the OnDurable hook.
func (s *Stream) markDurable(seq int64, version *int64) error {
	s.mu.Lock()
	switch {
	case seq < s.durable:
		s.mu.Unlock()
		return fmt.Errorf("the server says seq %d is durable, after seq %d was: durable batches were lost", seq, s.durable)
	case seq >= s.nextSeq:
		s.mu.Unlock()
		return fmt.Errorf("the server says seq %d is durable, but this stream wrote only up to %d: is another client writing as %q?", seq, s.nextSeq-1, s.writer)
	}
	if version != nil {
		s.version, s.versions = *version, true
	}
	advanced := seq > s.durable
	n := 0
	for ; n < len(s.buf) && s.buf[n].seq <= seq; n++ {
		s.buf[n].rec.Release()
		s.inflight -= s.buf[n].size
	}
	s.buf = append(s.buf[:0], s.buf[n:]...)
	s.durable = seq
	s.broadcast()
	s.mu.Unlock()
	if advanced && s.cfg.onDurable != nil {
		s.cfg.onDurable(seq)
	}
	return nil
}

// checkAllDurable is the closed answer's check: the server has committed
// what remained, so nothing may be left.
func (s *Stream) checkAllDurable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.buf) > 0 {
		return fmt.Errorf("the server closed the stream at durable seq %d, but seqs up to %d were written", s.durable, s.nextSeq-1)
	}
	return nil
}

// streamAnswer is any PutResult app_metadata of a continuous stream: the
// opening answer, a durability answer or the closed answer.
type streamAnswer struct {
	Writer     string `json:"writer"`
	DurableSeq *int64 `json:"durable_seq"`
	Version    *int64 `json:"version"`
	Rows       int64  `json:"rows"`
	Closed     bool   `json:"closed"`
}

func decodeStreamAnswer(meta []byte) (streamAnswer, error) {
	var a streamAnswer
	if err := json.Unmarshal(meta, &a); err != nil {
		return streamAnswer{}, fmt.Errorf("undecodable answer %q (is this a Quiver server?): %w", meta, err)
	}
	if a.DurableSeq != nil && *a.DurableSeq < 0 {
		return streamAnswer{}, fmt.Errorf("answer %s has a negative durable_seq", meta)
	}
	return a, nil
}

// wireWriter sends an ipc.Writer's payloads as FlightData, each with the
// app_metadata in meta. It drops the writer's first payload, its schema:
// sendSchema sent the schema first, alone, for the opening answer.
type wireWriter struct {
	call          flight.FlightService_DoPutClient
	meta          []byte
	body          bytes.Buffer
	schemaDropped bool
}

func (w *wireWriter) Start() error { return nil }
func (w *wireWriter) Close() error { return nil }

func (w *wireWriter) WritePayload(p ipc.Payload) error {
	if !w.schemaDropped {
		w.schemaDropped = true
		return nil
	}
	meta := p.Meta()
	defer meta.Release()
	w.body.Reset()
	if err := p.SerializeBody(&w.body); err != nil {
		return err
	}
	return w.call.Send(&flight.FlightData{DataHeader: meta.Bytes(), DataBody: w.body.Bytes(), AppMetadata: w.meta})
}

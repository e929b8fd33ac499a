package flightsvc

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/flightsvc/ipccheck"
	"github.com/quiver-ingest/quiver/internal/membudget"
	"github.com/quiver-ingest/quiver/writers"
)

// StreamWindowBytes is the gRPC receive window of a stream, which the
// server sets (grpc.InitialWindowSize, which also turns off gRPC's dynamic
// windows of up to 16 MiB per stream): what gRPC may buffer of a stream's
// next message while the stream is not reading, outside the budget. While
// it reads, gRPC widens the window to the message, which is reserved.
const StreamWindowBytes = 64 << 10

// recvGuard is the flight.DataStreamReader under a DoPut's record reader:
// every message passes its checks before arrow-go decodes it. It enforces
// what arrow-go's Flight reader does not: the body size limit
// (ipc.WithBodySizeLimit applies only to readers over an io.Reader; gRPC's
// receive limit, set from MaxRecvMsgSize, is only the hard cap behind it),
// bounded IPC headers that match the stream's schema (package ipccheck), a
// bound on the dictionaries a stream keeps, and one schema per stream,
// naming the changed column.
//
// It also charges what is received to the endpoint's memory share and the
// client's quota (see reserve) and, once armed by the pump, cancels a
// stream idle for longer than limits.stream_idle_timeout. It is used by
// one goroutine at a time: the handler while the schema is read, then the
// receiver; close gives back what it holds.
type recvGuard struct {
	stream flight.DataStreamReader
	// reservation is what the stream reserves before each message: the
	// most gRPC reads for one (Service.MaxRecvMsgSize).
	reservation int64
	// first is the stream's first message, which doPut read to check the
	// descriptor and the caller's permission; the first Recv returns it.
	first *flight.FlightData
	limit int64
	// dictLimit bounds the dictionary bytes the stream's reader keeps (the
	// endpoint's budget): they live as long as the stream, outside the
	// budget that batches in flight are charged to.
	dictLimit int64
	mem       memory.Allocator

	messages int              // messages received
	layout   *ipccheck.Layout // what batches must carry; nil before the schema
	batches  int              // record batches passed
	dicts    map[int64]int64  // dictionary id → bytes the reader keeps
	// schema is the stream's schema once read; nil before.
	schema *arrow.Schema
	// meta is the app_metadata of the last message received: after the
	// reader's Next, its batch's (a continuous stream's seq).
	meta []byte

	// ctx bounds the waits for memory: the stream's, then the pump's.
	ctx context.Context
	// acct charges the endpoint's share and the client's quota.
	acct membudget.Account
	// Bytes charged as received: reserved for the message being read,
	// pending for messages read and not yet part of a decoded batch.
	reserved, pending int64
	admitted          bool
	// busy, when set, marks the stream's transaction busy while the
	// stream waits for memory and when a message arrives (putStream.busy).
	busy func() (done func())
	// idle, when armed, fires after limits.stream_idle_timeout in Recv.
	idle        *time.Timer
	idleTimeout time.Duration
	receiving   atomic.Bool // in recv, where the idle timer runs
}

// reserve charges the next message's bytes before gRPC reads it (gRPC
// widens the stream's window to the message once the stream reads, then
// holds it whole): the largest message gRPC accepts, as nothing tells its
// size before. The stream's first message is not reserved for
// (recvBy); later ones are, charged to the client's quota too, so that
// streams waiting for their client's next message hold at most that
// quota. A stream holds nothing while it waits, or streams waiting with a
// few bytes each could starve one another: its pending bytes (a
// dictionary before its batch, the first message) are given back and
// then covered by what it waits for. The first reservation admits the
// stream: it waits at most limits.admission_timeout. The surplus is given
// back once the message is there (received).
func (g *recvGuard) reserve() error {
	n := max(g.reservation, g.pending)
	g.acct.Release(membudget.Received, g.pending)
	wait := g.acct.Acquire
	if !g.admitted {
		wait = g.acct.Admit
	}
	if g.busy != nil {
		defer g.busy()()
	}
	if err := wait(g.ctx, membudget.Received, n); err != nil {
		g.acct.Charge(membudget.Received, g.pending) // still held
		if !g.admitted {
			return fmt.Errorf("doput: %w", err)
		}
		return err
	}
	g.admitted, g.reserved = true, n-g.pending
	return nil
}

// received charges fd, now in memory, against the reservation.
// A compressed batch is charged its decompressed size (grow more): the
// reservation covers it (ipccheck.CheckBatch refuses more than
// max_message_bytes decompressed), so a stream never waits for memory
// while holding a message. One with a buffer stored uncompressed holds
// its body besides, up to a second message more than the reservation:
// charged all the same (the budget runs over by that much, and the next
// reservation waits).
func (g *recvGuard) received(fd *flight.FlightData, grow int64) {
	n := int64(len(fd.GetDataBody())+len(fd.GetDataHeader())+len(fd.GetAppMetadata())) + grow
	g.acct.Trade(membudget.Received, g.reserved, membudget.Received, n)
	g.reserved = 0
	g.pending += n
}

// takePending returns the received bytes not yet part of a decoded batch
// and hands them over to the caller.
func (g *recvGuard) takePending() int64 {
	n := g.pending
	g.pending = 0
	return n
}

// close gives back what the guard holds and disarms the idle timer.
func (g *recvGuard) close() {
	if g.idle != nil {
		g.idle.Stop()
	}
	g.acct.Release(membudget.Received, g.reserved+g.pending)
	g.reserved, g.pending = 0, 0
}

// armIdle makes Recv call onIdle once it has waited longer than d for a
// message, unless awaited reports that the client waits for the server
// (acks of batches it sent): then the wait starts over.
func (g *recvGuard) armIdle(d time.Duration, awaited func() bool, onIdle func()) {
	if d <= 0 {
		return
	}
	g.idleTimeout = d
	g.idle = time.AfterFunc(d, func() {
		switch {
		case !g.receiving.Load(): // fired as Recv returned
		case awaited():
			g.idle.Reset(d)
		default:
			onIdle()
		}
	})
	g.idle.Stop()
}

// recv reads the next message from gRPC, under the idle timer.
func (g *recvGuard) recv() (*flight.FlightData, error) {
	if g.idle == nil {
		return g.stream.Recv()
	}
	g.receiving.Store(true)
	g.idle.Reset(g.idleTimeout)
	defer func() {
		g.idle.Stop()
		g.receiving.Store(false)
	}()
	return g.stream.Recv()
}

func (g *recvGuard) Recv() (*flight.FlightData, error) {
	fd := g.first
	g.first = nil
	if fd == nil {
		if err := g.reserve(); err != nil {
			return nil, err
		}
		var err error
		if fd, err = g.recv(); err != nil {
			return nil, err
		}
	}
	if g.busy != nil { // the client is active
		g.busy()()
	}
	g.messages++
	g.meta = fd.GetAppMetadata()
	grow, err := g.check(fd)
	if err != nil {
		return nil, err // the reservation is given back by close
	}
	g.received(fd, grow)
	return fd, nil
}

// check checks fd, the stream's next message, and returns how much more
// than its size it takes once decoded (a compressed batch's growth).
func (g *recvGuard) check(fd *flight.FlightData) (grow int64, err error) {
	body := fd.GetDataBody()
	if n := int64(len(body)); n > g.limit {
		return 0, writers.Errorf(writers.ErrExhausted, "doput: a batch of %d bytes exceeds the limit of %d bytes (limits.max_message_bytes): send smaller batches or raise the limit", n, g.limit)
	}
	header := fd.GetDataHeader()
	if len(header) == 0 { // a descriptor sent alone came before the schema (doPut)
		return 0, writers.Errorf(writers.ErrInvalid, "doput: message %d carries no IPC header: after the descriptor, every message must be a schema, dictionary or record batch", g.messages)
	}
	m, err := ipccheck.ParseMessage(header)
	if err != nil {
		return 0, writers.Errorf(writers.ErrInvalid, "doput: message %d: malformed IPC header: %w", g.messages, err)
	}
	switch {
	case m.IsSchema():
		return 0, g.checkSchema(m, header)
	case g.layout == nil:
		return 0, writers.Errorf(writers.ErrInvalid, "doput: message %d is not a schema: send the schema first", g.messages)
	}
	d, err := ipccheck.CheckBatch(m, g.layout, ipccheck.Batch{Body: body, Unpacked: g.limit})
	switch {
	case err != nil && d.Is:
		return 0, writers.Errorf(writers.ErrInvalid, "doput: dictionary batch (id %d) before batch %d: %w", d.ID, g.batches, err)
	case err != nil:
		return 0, writers.Errorf(writers.ErrInvalid, "doput: batch %d: %w", g.batches, err)
	case d.Is:
		return max(d.Size-int64(len(body)), 0), g.keepDict(d)
	}
	g.batches++
	return max(d.Size-int64(len(body)), 0), nil
}

// checkSchema checks a schema message: the stream's first, or a later one
// that must not differ (and is refused anyway).
func (g *recvGuard) checkSchema(m ipccheck.Message, header []byte) error {
	l, err := ipccheck.CheckSchema(m, len(header))
	if err != nil {
		return writers.Errorf(writers.ErrInvalid, "doput: schema: %w", err)
	}
	if g.layout == nil {
		g.layout = l
		return nil
	}
	if g.schema != nil {
		if next, ok := g.schemaMessage(header); ok {
			if diff := writers.SchemaMismatch(g.schema, next); diff != "" {
				return writers.Errorf(writers.ErrInvalid, "doput: the schema changed mid-stream: %s: every batch of a stream must have the stream's first schema; send other schemas in another stream", diff)
			}
		}
	}
	return writers.Errorf(writers.ErrInvalid, "doput: the stream sent its schema a second time: send it once, before the first batch")
}

// keepDict counts what the reader keeps of dictionary batch d (d.size,
// decompressed): a delta adds to its dictionary, anything else replaces
// it.
func (g *recvGuard) keepDict(d ipccheck.Dictionary) error {
	size := d.Size
	if g.dicts == nil {
		g.dicts = map[int64]int64{}
	}
	if d.Delta {
		g.dicts[d.ID] += size
	} else {
		g.dicts[d.ID] = size
	}
	var total int64
	for _, n := range g.dicts {
		total += n
	}
	if total > g.dictLimit {
		return writers.Errorf(writers.ErrExhausted, "doput: the stream's dictionaries hold %d bytes, more than the endpoint's buffer budget of %d bytes (limits.endpoint_buffer_bytes): replace dictionaries instead of growing them, or start a new stream", total, g.dictLimit)
	}
	return nil
}

// schemaMessage decodes header, a checked IPC schema message.
func (g *recvGuard) schemaMessage(header []byte) (schema *arrow.Schema, ok bool) {
	msg := ipc.NewMessage(memory.NewBufferBytes(header), memory.NewBufferBytes(nil))
	rdr, err := ipc.NewReaderFromMessageReader(&oneMessage{msg: msg}, ipc.WithAllocator(g.mem))
	if err != nil {
		return nil, false
	}
	defer rdr.Release()
	return rdr.Schema(), true
}

// oneMessage is an ipc.MessageReader over a single message it owns.
type oneMessage struct {
	msg  *ipc.Message
	read bool
}

func (m *oneMessage) Message() (*ipc.Message, error) {
	if m.read {
		return nil, io.EOF
	}
	m.read = true
	return m.msg, nil
}

func (m *oneMessage) Retain() {}

func (m *oneMessage) Release() {
	if m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
}

// guardMessages is the ipc.MessageReader of a DoPut stream: the guard's
// checked messages, as arrow-go's IPC reader wants them. It differs from
// flight.NewRecordReader's in one way that matters: it lets go of the
// previous message before waiting for the next. The reader decodes
// batches without copying, so that message holds the previous batch's
// bytes; kept while the stream waits for memory, every waiting stream
// would hold a batch outside the budget (8 streams of 60 MB batches under
// a 64 MiB budget peaked at 670 MiB that way).
type guardMessages struct {
	guard *recvGuard
	msg   *ipc.Message
}

func (m *guardMessages) Message() (*ipc.Message, error) {
	m.Release()
	fd, err := m.guard.Recv()
	if err != nil {
		return nil, err
	}
	m.msg = ipc.NewMessage(memory.NewBufferBytes(fd.GetDataHeader()), memory.NewBufferBytes(fd.GetDataBody()))
	return m.msg, nil
}

// Retain does nothing: the reader is the only user, and Release is called
// by it exactly once, when it is released.
func (m *guardMessages) Retain() {}

func (m *guardMessages) Release() {
	if m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
}

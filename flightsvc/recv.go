package flightsvc

import (
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// recvGuard is the flight.DataStreamReader under a DoPut's record reader:
// every message passes its checks before arrow-go decodes it. It enforces
// what arrow-go's Flight reader does not: the body size limit
// (ipc.WithBodySizeLimit applies only to readers over an io.Reader; gRPC's
// receive limit, set from MaxRecvMsgSize, is only the hard cap behind it),
// bounded IPC headers that match the stream's schema (ipccheck.go), a
// bound on the dictionaries a stream keeps, and one schema per stream,
// naming the changed column. It is used by one goroutine at a time: the
// handler while the schema is read, then the receiver.
type recvGuard struct {
	stream flight.DataStreamReader
	// first is the stream's first message, which doPut read to check the
	// descriptor and the caller's permission; the first Recv returns it.
	first *flight.FlightData
	limit int64
	// dictLimit bounds the dictionary bytes the stream's reader keeps (the
	// endpoint's budget): they live as long as the stream, outside the
	// budget that batches in flight are charged to.
	dictLimit int64
	mem       memory.Allocator

	received int             // messages received
	layout   *streamLayout   // what batches must carry; nil before the schema
	batches  int             // record batches passed
	dicts    map[int64]int64 // dictionary id → bytes the reader keeps
	// schema is the stream's schema once read; nil before.
	schema *arrow.Schema
}

func (g *recvGuard) Recv() (*flight.FlightData, error) {
	fd := g.first
	g.first = nil
	if fd == nil {
		var err error
		if fd, err = g.stream.Recv(); err != nil {
			return nil, err
		}
	}
	g.received++
	body := fd.GetDataBody()
	if n := int64(len(body)); n > g.limit {
		return nil, writers.Errorf(writers.ErrExhausted, "doput: a batch of %d bytes exceeds the limit of %d bytes (limits.max_message_bytes): send smaller batches or raise the limit", n, g.limit)
	}
	header := fd.GetDataHeader()
	if len(header) == 0 {
		if g.received == 1 { // the descriptor may come alone, before the schema
			return fd, nil
		}
		return nil, writers.Errorf(writers.ErrInvalid, "doput: message %d carries no IPC header: after the descriptor, every message must be a schema, dictionary or record batch", g.received)
	}
	m, err := parseMessage(header)
	if err != nil {
		return nil, writers.Errorf(writers.ErrInvalid, "doput: message %d: malformed IPC header: %w", g.received, err)
	}
	switch {
	case m.kind == headerSchema:
		return fd, g.checkSchema(m, header)
	case g.layout == nil:
		return nil, writers.Errorf(writers.ErrInvalid, "doput: message %d is not a schema: send the schema first", g.received)
	}
	d, err := checkBatch(m, g.layout, batchCheck{body: body, unpacked: g.limit})
	switch {
	case err != nil && d.is:
		return nil, writers.Errorf(writers.ErrInvalid, "doput: dictionary batch (id %d) before batch %d: %w", d.id, g.batches, err)
	case err != nil:
		return nil, writers.Errorf(writers.ErrInvalid, "doput: batch %d: %w", g.batches, err)
	case d.is:
		return fd, g.keepDict(d)
	}
	g.batches++
	return fd, nil
}

// checkSchema checks a schema message: the stream's first, or a later one
// that must not differ (and is refused anyway).
func (g *recvGuard) checkSchema(m ipcMessage, header []byte) error {
	l, err := checkSchema(m, len(header))
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
func (g *recvGuard) keepDict(d dictBatch) error {
	size := d.size
	if g.dicts == nil {
		g.dicts = map[int64]int64{}
	}
	if d.delta {
		g.dicts[d.id] += size
	} else {
		g.dicts[d.id] = size
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

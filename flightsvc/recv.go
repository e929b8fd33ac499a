package flightsvc

import (
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// recvGuard is the flight.DataStreamReader under a DoPut's record reader.
// It enforces what arrow-go's Flight reader does not: the body size limit
// (ipc.WithBodySizeLimit applies only to readers over an io.Reader; gRPC's
// receive limit, set from MaxRecvMsgSize, is only the hard cap behind it)
// and one
// schema per stream, naming the changed column. It is used by one goroutine
// at a time: the handler while the schema is read, then the receiver.
type recvGuard struct {
	stream flight.DataStreamReader
	limit  int64
	mem    memory.Allocator
	// schema is the stream's schema once read; nil before.
	schema *arrow.Schema
}

func (g *recvGuard) Recv() (*flight.FlightData, error) {
	fd, err := g.stream.Recv()
	if err != nil {
		return nil, err
	}
	if n := int64(len(fd.GetDataBody())); n > g.limit {
		return nil, writers.Errorf(writers.ErrExhausted, "doput: a batch of %d bytes exceeds the limit of %d bytes (limits.max_message_bytes): send smaller batches or raise the limit", n, g.limit)
	}
	if g.schema != nil && len(fd.GetDataHeader()) > 0 {
		if next, ok := g.schemaMessage(fd.GetDataHeader()); ok {
			if diff := writers.SchemaMismatch(g.schema, next); diff != "" {
				return nil, writers.Errorf(writers.ErrInvalid, "doput: the schema changed mid-stream: %s: every batch of a stream must have the stream's first schema; send other schemas in another stream", diff)
			}
			return nil, writers.Errorf(writers.ErrInvalid, "doput: the stream sent its schema a second time: send it once, before the first batch")
		}
	}
	return fd, nil
}

// schemaMessage decodes header when it is an IPC schema message. Malformed
// headers are left for the IPC reader to report.
func (g *recvGuard) schemaMessage(header []byte) (schema *arrow.Schema, ok bool) {
	defer func() {
		if recover() != nil {
			schema, ok = nil, false
		}
	}()
	msg := ipc.NewMessage(memory.NewBufferBytes(header), memory.NewBufferBytes(nil))
	if msg.Type() != ipc.MessageSchema {
		msg.Release()
		return nil, false
	}
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

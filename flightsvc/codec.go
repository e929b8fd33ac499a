package flightsvc

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Codec is the gRPC codec of the Flight listener (grpc.ForceServerCodecV2):
// gRPC's protobuf codec, except for received FlightData, whose byte fields
// point into the one buffer that holds the message instead of being copied
// out of it.
//
// gRPC's codec gathers a message's HTTP/2 frames into a pooled buffer and
// protobuf copies data_body out of that, so a batch is in memory three
// times while it is read, and the pooled copy stays in the pool after.
// Here it is gathered once, into a buffer of its own that becomes the
// decoded batch's memory (the IPC reader does not copy either), and that
// the memory budget charges whole (ownFields keeps it the size of the
// fields a batch is charged for).
type Codec struct{ base encoding.CodecV2 }

// NewCodec returns the Flight listener's codec.
func NewCodec() Codec { return Codec{base: encoding.GetCodecV2(grpcproto.Name)} }

// Name is "proto": clients see the usual content type.
func (c Codec) Name() string { return c.base.Name() }

func (c Codec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c Codec) Unmarshal(data mem.BufferSlice, v any) error {
	fd, ok := v.(*flight.FlightData)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	// Into a new slice, not a pooled one: gRPC frees data when Unmarshal
	// returns, the batch lives on.
	b := gather(data)
	if err := unmarshalFlightData(b, fd); err != nil {
		return err
	}
	ownFields(fd, len(b))
	return nil
}

// gather concatenates data's buffers (a message's HTTP/2 frames) into one
// new slice. It is data.Materialize without clearing the slice first
// (bytes.Join allocates without zeroing what it is about to write over),
// which cost a receive-bound server a tenth of its CPU.
func gather(data mem.BufferSlice) []byte {
	if len(data) == 0 {
		return nil
	}
	parts := make([][]byte, len(data))
	for i, buf := range data {
		parts[i] = buf.ReadOnlyData()
	}
	return bytes.Join(parts, nil)
}

// maxSlack is how many bytes of a received message may lie outside the
// byte fields that alias it (tags, the descriptor, unknown fields) before
// the fields are copied out of it.
const maxSlack = 64 << 10

// ownFields copies fd's byte fields into a buffer of their own when the
// message of size bytes they alias holds more than maxSlack besides: an
// alias keeps the whole message in memory, and the memory budget charges
// a batch its fields (a hostile client's unknown or repeated fields would
// be held uncharged).
func ownFields(fd *flight.FlightData, size int) {
	fields := [...]*[]byte{&fd.DataHeader, &fd.DataBody, &fd.AppMetadata}
	n := 0
	for _, f := range fields {
		n += len(*f)
	}
	if size-n <= maxSlack {
		return
	}
	own := make([]byte, 0, n)
	for _, f := range fields {
		if len(*f) == 0 {
			*f = nil // an empty slice of the message holds it too
			continue
		}
		at := len(own)
		own = append(own, *f...)
		*f = own[at:len(own):len(own)]
	}
}

// The fields of FlightData (Flight.proto).
const (
	fieldFlightDescriptor protowire.Number = 1
	fieldDataHeader       protowire.Number = 2
	fieldAppMetadata      protowire.Number = 3
	fieldDataBody         protowire.Number = 1000
)

// unmarshalFlightData decodes b into fd as proto.Unmarshal does (later
// scalar fields win, message fields merge, unknown fields are kept),
// except that the byte fields alias b.
func unmarshalFlightData(b []byte, fd *flight.FlightData) error {
	fd.Reset()
	var unknown []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("flight data: %w", protowire.ParseError(n))
		}
		if !num.IsValid() {
			return fmt.Errorf("flight data: invalid field number %d", num)
		}
		known := typ == protowire.BytesType && (num == fieldFlightDescriptor || num == fieldDataHeader || num == fieldAppMetadata || num == fieldDataBody)
		if !known {
			m := protowire.ConsumeFieldValue(num, typ, b[n:])
			if m < 0 {
				return fmt.Errorf("flight data: field %d: %w", num, protowire.ParseError(m))
			}
			unknown = append(protowire.AppendTag(unknown, num, typ), b[n:n+m]...) // the tag re-encoded, as protobuf keeps it
			b = b[n+m:]
			continue
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return fmt.Errorf("flight data: field %d: %w", num, protowire.ParseError(m))
		}
		b = b[n+m:]
		v = v[:len(v):len(v)] // an append to one field must not write over the next
		switch num {
		case fieldFlightDescriptor:
			if fd.FlightDescriptor == nil {
				fd.FlightDescriptor = new(flight.FlightDescriptor)
			}
			if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(v, fd.FlightDescriptor); err != nil {
				return fmt.Errorf("flight data: descriptor: %w", err)
			}
		case fieldDataHeader:
			fd.DataHeader = v
		case fieldAppMetadata:
			fd.AppMetadata = v
		case fieldDataBody:
			fd.DataBody = v
		}
	}
	if unknown != nil {
		fd.ProtoReflect().SetUnknown(unknown)
	}
	return nil
}

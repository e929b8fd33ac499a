package flightsvc

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"
)

// Hostile IPC messages, built from valid ones by patching one value with
// the flatbuffers primitives (independently of ipccheck/flatbuf.go, which they
// test). They are exported to the external tests, and seeds of
// FuzzDoPutMessages.

// HostileSchema is the schema the hostile streams are made of: "id"
// (int64) and "name" (nullable utf8); its schema message has 184 bytes.
func HostileSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
}

// Encode returns the FlightData messages of a stream of recs with schema:
// the schema first, then one per batch (dictionaries included).
func Encode(schema *arrow.Schema, recs ...arrow.RecordBatch) []*flight.FlightData {
	return EncodeWith(nil, schema, recs...)
}

// EncodeWith is Encode with IPC writer options (compression).
func EncodeWith(opts []ipc.Option, schema *arrow.Schema, recs ...arrow.RecordBatch) []*flight.FlightData {
	var c capture
	w := flight.NewRecordWriter(&c, append([]ipc.Option{ipc.WithSchema(schema)}, opts...)...)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			panic(err)
		}
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return c.out
}

type capture struct{ out []*flight.FlightData }

func (c *capture) Send(fd *flight.FlightData) error {
	// The writer reuses nothing, but copy to be sure the fixture is ours.
	c.out = append(c.out, &flight.FlightData{
		DataHeader: append([]byte(nil), fd.DataHeader...),
		DataBody:   append([]byte(nil), fd.DataBody...),
	})
	return nil
}

// Rows builds n rows of HostileSchema: id i, name "row-i".
func Rows(n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, HostileSchema())
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprint("row-", i))
	}
	return b.NewRecordBatch()
}

// fbAt is the table at pos of buf.
func fbAt(buf []byte, pos flatbuffers.UOffsetT) *flatbuffers.Table {
	return &flatbuffers.Table{Bytes: buf, Pos: pos}
}

// fbField returns the position of the value of field slot of t.
func fbField(t *flatbuffers.Table, slot int) flatbuffers.UOffsetT {
	o := t.Offset(flatbuffers.VOffsetT(4 + 2*slot))
	if o == 0 {
		panic(fmt.Sprintf("field %d absent", slot))
	}
	return t.Pos + flatbuffers.UOffsetT(o)
}

// fbSub returns the table field slot of t points to.
func fbSub(t *flatbuffers.Table, slot int) *flatbuffers.Table {
	return fbAt(t.Bytes, t.Indirect(fbField(t, slot)))
}

// messageHeader returns the header table (Schema, RecordBatch, ...) of
// an IPC Message flatbuffer.
func messageHeader(buf []byte) *flatbuffers.Table {
	return fbSub(fbAt(buf, flatbuffers.GetUOffsetT(buf)), 2) // Message.header
}

// ChildrenBomb is the schema message of HostileSchema with the children
// count of its first field flipped to 2^30: arrow-go would allocate 2^30
// fields (about 100 GiB) for it, a fatal out of memory.
func ChildrenBomb() []byte {
	hdr := Encode(HostileSchema())[0].DataHeader
	schema := messageHeader(hdr)
	fields := schema.Vector(fbField(schema, 1) - schema.Pos) // Schema.fields
	field := fbAt(hdr, schema.Indirect(fields))
	children := field.Indirect(fbField(field, 5)) // Field.children: its length
	binary.LittleEndian.PutUint32(hdr[children:], 1<<30)
	return hdr
}

// patchBatch returns the messages of a stream of Rows(rows) with the
// batch's header and body changed by patch.
func patchBatch(rows int, patch func(header, body []byte)) []*flight.FlightData {
	rec := Rows(rows)
	defer rec.Release()
	msgs := Encode(HostileSchema(), rec)
	patch(msgs[1].DataHeader, msgs[1].DataBody)
	return msgs
}

// batchBuffer returns the offset of buffer i in the body of a record
// batch message.
func batchBuffer(header []byte, i int) int {
	rb := messageHeader(header)
	buffers := rb.Vector(fbField(rb, 2) - rb.Pos) // RecordBatch.buffers
	return int(binary.LittleEndian.Uint64(header[buffers+flatbuffers.UOffsetT(16*i):]))
}

// NegativeOffset is a stream of 3 rows whose second string offset is -3.
func NegativeOffset() []*flight.FlightData {
	return patchBatch(3, func(header, body []byte) {
		offsets := batchBuffer(header, 3) // id validity, id data, name validity, name offsets
		binary.LittleEndian.PutUint32(body[offsets+4:], uint32(0xFFFFFFFD))
	})
}

// NegativeLength is a stream of 3 rows whose batch claims -1 rows.
func NegativeLength() []*flight.FlightData {
	return patchBatch(3, func(header, _ []byte) {
		rb := messageHeader(header)
		binary.LittleEndian.PutUint64(header[fbField(rb, 0):], ^uint64(0)) // RecordBatch.length
	})
}

// ExtraColumn is the schema of one column, then a batch of two.
func ExtraColumn() []*flight.FlightData {
	one := arrow.NewSchema(HostileSchema().Fields()[:1], nil)
	rec := Rows(2)
	defer rec.Release()
	return []*flight.FlightData{Encode(one)[0], Encode(HostileSchema(), rec)[1]}
}

// HostileStreams returns the hostile streams above by name.
func HostileStreams() map[string][]*flight.FlightData {
	return map[string][]*flight.FlightData{
		"children bomb":   {{DataHeader: ChildrenBomb()}},
		"negative offset": NegativeOffset(),
		"negative length": NegativeLength(),
		"extra column":    ExtraColumn(),
	}
}

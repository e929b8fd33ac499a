package flightsvc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/quiver-ingest/quiver/flightsvc/ipccheck"
	"github.com/quiver-ingest/quiver/internal/membudget"
	"github.com/quiver-ingest/quiver/writers"
)

// richSchema has a column of every kind of Arrow type arrow-go writes.
func richSchema() *arrow.Schema {
	pair := []arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, {Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}}
	types := []arrow.DataType{
		arrow.Null,
		arrow.FixedWidthTypes.Boolean,
		arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Uint64,
		arrow.FixedWidthTypes.Float16, arrow.PrimitiveTypes.Float64,
		&arrow.Decimal128Type{Precision: 10, Scale: 2}, &arrow.Decimal256Type{Precision: 40, Scale: 2},
		arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Date64,
		arrow.FixedWidthTypes.Time32ms, arrow.FixedWidthTypes.Time64ns,
		&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"},
		arrow.FixedWidthTypes.Duration_ns,
		arrow.FixedWidthTypes.MonthInterval, arrow.FixedWidthTypes.DayTimeInterval, arrow.FixedWidthTypes.MonthDayNanoInterval,
		arrow.BinaryTypes.Binary, arrow.BinaryTypes.String, arrow.BinaryTypes.LargeBinary, arrow.BinaryTypes.LargeString,
		arrow.BinaryTypes.StringView, arrow.BinaryTypes.BinaryView,
		&arrow.FixedSizeBinaryType{ByteWidth: 3},
		arrow.ListOf(arrow.PrimitiveTypes.Int32), arrow.LargeListOf(arrow.BinaryTypes.StringView),
		arrow.ListViewOf(arrow.PrimitiveTypes.Int32), arrow.LargeListViewOf(arrow.PrimitiveTypes.Int32),
		arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int32),
		arrow.StructOf(pair...),
		arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32),
		arrow.DenseUnionOf(pair, []arrow.UnionTypeCode{0, 1}),
		arrow.SparseUnionOf(pair, []arrow.UnionTypeCode{0, 1}),
		&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String},
		arrow.ListOf(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}),
		arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.String),
		arrow.ListOf(arrow.Null),
	}
	fields := make([]arrow.Field, len(types))
	for i, dt := range types {
		fields[i] = arrow.Field{Name: dt.String(), Type: dt, Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}

// richRows is JSON rows of richSchema, in column order.
var richRows = []string{
	`null, true, -1, 18446744073709551615, 1.5, 2.25, "12.34", "1234567890123456789012345678.90", 19000, 1641081600000, 1000, 1000000, 1700000000000000, 5, {"months": 3}, {"days": 1, "milliseconds": 2}, {"months": 1, "days": 2, "nanoseconds": 3}, "AAE=", "héllo", "AAEC", "large", "a string longer than twelve bytes", "AAECAwQFBgcICQoLDA0ODxAREhM=", "AAEC", [1, null, 3], ["x", "a view longer than twelve bytes"], [1, 2], [3], [4, 5], {"a": 1, "b": "x"}, [{"key": "k", "value": 1}], [0, 7], [1, "s"], "red", ["p", "q"], "run", [null, null]`,
	`null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, [1, null], [0, null], null, null, "run", null`,
	`null, false, 127, 0, -0.5, 1e300, "-1.00", "0.01", 0, 0, 0, 0, 0, 0, {"months": 0}, {"days": 0, "milliseconds": 0}, {"months": 0, "days": 0, "nanoseconds": 0}, "", "", "", "", "", "", "AAAA", [], [], [], [], [6, 7], {"a": null, "b": null}, [], [0, 1], [1, null], "blue", [], "other", []`,
}

func richRecords(t testing.TB, mem memory.Allocator) []arrow.RecordBatch {
	t.Helper()
	s := richSchema()
	var recs []arrow.RecordBatch
	for _, row := range richRows {
		var obj strings.Builder
		obj.WriteString("[{")
		for i, v := range splitTop(row) {
			if i > 0 {
				obj.WriteString(",")
			}
			obj.WriteString(`"` + s.Field(i).Name + `":` + v)
		}
		obj.WriteString("}]")
		rec, _, err := array.RecordFromJSON(mem, s, strings.NewReader(obj.String()))
		if err != nil {
			t.Fatalf("row %s: %v", row, err)
		}
		recs = append(recs, rec)
	}
	return recs
}

// splitTop splits a JSON list body at its top-level commas.
func splitTop(s string) []string {
	var out []string
	depth, inStr, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// readGuarded reads msgs through a recvGuard (limit bytes per message) as
// DoPut does, validating each batch; it returns the batches (the caller
// releases them) and the first error.
func readGuarded(msgs []*flight.FlightData, mem memory.Allocator, limit int64) ([]arrow.RecordBatch, error) {
	first := &flight.FlightData{
		FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"events"}},
		DataHeader:       msgs[0].DataHeader,
		DataBody:         msgs[0].DataBody,
	}
	g := &recvGuard{stream: &messages{msgs: append([]*flight.FlightData{first}, msgs[1:]...)}, limit: limit, dictLimit: limit, mem: mem, ctx: context.Background(), acct: testShare().Account(nil)}
	rdr, err := flight.NewRecordReader(g, ipc.WithAllocator(mem))
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	g.schema = rdr.Schema()
	var out []arrow.RecordBatch
	for n := 0; rdr.Next(); n++ {
		rec := rdr.RecordBatch()
		if err := ipccheck.Validate(rec); err != nil {
			return out, err
		}
		rec.Retain()
		out = append(out, rec)
	}
	return out, rdr.Err()
}

// Streams of every type, plain and compressed, dictionaries replaced and
// grown by deltas, pass the checks unchanged: the checks refuse only what
// no writer sends.
func TestGuardAcceptsValidStreams(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	recs := richRecords(t, mem)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for name, opts := range map[string][]ipc.Option{
		"plain":  nil,
		"zstd":   {ipc.WithZstd()},
		"lz4":    {ipc.WithLZ4()},
		"deltas": {ipc.WithDictionaryDeltas(true)},
	} {
		t.Run(name, func(t *testing.T) {
			var c capture
			w := flight.NewRecordWriter(&c, append(opts, ipc.WithSchema(richSchema()), ipc.WithAllocator(mem))...)
			for _, r := range recs {
				if err := w.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := readGuarded(c.out, mem, 1<<20)
			defer func() {
				for _, r := range got {
					r.Release()
				}
			}()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(recs) {
				t.Fatalf("%d batches, want %d", len(got), len(recs))
			}
			for i := range recs {
				if !array.RecordEqual(got[i], recs[i]) {
					t.Fatalf("batch %d:\n got %v\nwant %v", i, got[i], recs[i])
				}
			}
		})
	}
}

// Every hostile stream is refused with the class and a message naming the
// problem, before arrow-go allocates from it; nothing stays allocated.
func TestGuardRefusesHostileStreams(t *testing.T) {
	if n := len(ChildrenBomb()); n != 184 {
		t.Fatalf("the children bomb has %d bytes, want the 184 of the report", n)
	}
	views := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.BinaryTypes.StringView}}, nil)
	viewRec, _, err := array.RecordFromJSON(memory.DefaultAllocator, views, strings.NewReader(`[{"v":"a string longer than twelve bytes"}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer viewRec.Release()
	rows := Rows(3)
	defer rows.Release()
	var zstd capture
	w := flight.NewRecordWriter(&zstd, ipc.WithSchema(HostileSchema()), ipc.WithZstd())
	if err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	w.Close()

	tests := []struct {
		name      string
		msgs      []*flight.FlightData
		class     error
		fragments []string
	}{
		{"children count 2^30", []*flight.FlightData{{DataHeader: ChildrenBomb()}}, writers.ErrInvalid, []string{"schema", "1073741824 elements"}},
		{"negative string offset", NegativeOffset(), writers.ErrInvalid, []string{`column "name"`, "-3"}},
		{"row length -1", NegativeLength(), writers.ErrInvalid, []string{"batch 0", "-1 rows"}},
		{"two columns for a schema of one", ExtraColumn(), writers.ErrInvalid, []string{"batch 0", "2 field nodes", "needs 1"}},
		{"null count above the length", patchBatch(3, func(h, _ []byte) { patchWord(h, 1, 0, 1, 4) }), writers.ErrInvalid, []string{"field node 0 has 4 nulls for length 3"}},
		{"column length differs from the batch", patchBatch(3, func(h, _ []byte) { patchWord(h, 1, 1, 0, 2) }), writers.ErrInvalid, []string{`column "name" has 2 rows, the batch 3`}},
		{"node length above the body", patchBatch(3, func(h, _ []byte) { patchWord(h, 1, 1, 0, 1<<40) }), writers.ErrInvalid, []string{"field node 1 has length 1099511627776"}},
		{"buffer outside the body", patchBatch(3, func(h, _ []byte) { patchWord(h, 2, 1, 0, 1<<40) }), writers.ErrInvalid, []string{"buffer 1", "outside"}},
		{"variadic count 2^40", patchMsgs(Encode(views, viewRec), func(h, _ []byte) { patchWord(h, 4, 0, 0, 1<<40) }), writers.ErrInvalid, []string{"variadic buffer count 0 is 1099511627776"}},
		{"decompressed size 2^40", patchMsgs(zstd.out, func(h, b []byte) {
			binary.LittleEndian.PutUint64(b[batchBuffer(h, 1):], 1<<40) // id data's uncompressed length
		}), writers.ErrInvalid, []string{"decompress to more than 1048576 bytes"}},
		{"10,001 fields", []*flight.FlightData{{DataHeader: Encode(wideSchema(10_001))[0].DataHeader}}, writers.ErrInvalid, []string{"more than 10000 fields"}},
		{"65 levels", []*flight.FlightData{{DataHeader: Encode(deepSchema(65))[0].DataHeader}}, writers.ErrInvalid, []string{"nested more than 64 deep"}},
		{"2^40 fields from 40 shared tables", []*flight.FlightData{{DataHeader: sharedFieldsSchema(40)}}, writers.ErrInvalid, []string{"more than 10000 fields"}},
		{"one long name referenced 1000 times", []*flight.FlightData{{DataHeader: sharedNameSchema(1000, 10_000)}}, writers.ErrInvalid, []string{"refer to more bytes than"}},
		{"empty header after the schema", append(Encode(HostileSchema()), &flight.FlightData{}), writers.ErrInvalid, []string{"message 2 carries no IPC header"}},
		{"batch before the schema", Encode(HostileSchema(), rows)[1:], writers.ErrInvalid, []string{"not a schema"}},
		{"schema twice", append(Encode(HostileSchema()), Encode(HostileSchema())...), writers.ErrInvalid, []string{"schema a second time"}},
		{"garbage header", []*flight.FlightData{{DataHeader: []byte{1, 2, 3}}}, writers.ErrInvalid, []string{"malformed IPC header"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			got, err := readGuarded(tt.msgs, mem, 1<<20)
			for _, r := range got {
				r.Release()
			}
			if err == nil {
				t.Fatalf("accepted, want %v", tt.class)
			}
			// arrow-go reports a decoding error without a class; DoPut
			// makes it invalid input (streamError).
			if !errors.Is(streamError(err), tt.class) {
				t.Fatalf("error %v is not %v", err, tt.class)
			}
			for _, f := range tt.fragments {
				if !strings.Contains(err.Error(), f) {
					t.Fatalf("error %q does not mention %q", err, f)
				}
			}
		})
	}
}

// The dictionaries a stream keeps are bounded: deltas that grow them
// beyond the limit are ResourceExhausted.
// dictionaryDeltas is a stream of 20 one-row batches of a dictionary
// column, each adding a value of about size bytes as a dictionary delta.
func dictionaryDeltas(t *testing.T, size int, opts ...ipc.Option) *capture {
	t.Helper()
	s := arrow.NewSchema([]arrow.Field{{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}}}, nil)
	c := &capture{}
	w := flight.NewRecordWriter(c, append([]ipc.Option{ipc.WithSchema(s), ipc.WithDictionaryDeltas(true)}, opts...)...)
	b := array.NewDictionaryBuilder(memory.DefaultAllocator, s.Field(0).Type.(*arrow.DictionaryType)).(*array.BinaryDictionaryBuilder)
	defer b.Release()
	for i := range 20 {
		if err := b.AppendString(strings.Repeat("x", size) + fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
		col := b.NewArray()
		rec := array.NewRecordBatch(s, []arrow.Array{col}, 1)
		col.Release()
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	w.Close()
	return c
}

func TestGuardBoundsDictionaries(t *testing.T) {
	// The builder keeps its dictionary across arrays: each batch's
	// dictionary is the last one and one more value, sent as a delta.
	c := dictionaryDeltas(t, 1000)
	got, err := readGuarded(c.out, memory.DefaultAllocator, 10_000)
	for _, r := range got {
		r.Release()
	}
	if !errors.Is(err, writers.ErrExhausted) || !strings.Contains(err.Error(), "dictionaries hold") {
		t.Fatalf("error %v, want the dictionaries refused (ResourceExhausted)", err)
	}
	if len(got) < 5 {
		t.Fatalf("only %d batches before the refusal: the bound is too tight", len(got))
	}
}

// patchWord sets the k-th 8-byte word of element i of the vector at slot
// of a batch message's RecordBatch (nodes: 1, buffers: 2, variadic: 4).
func patchWord(header []byte, slot, i, k int, v int64) {
	rb := messageHeader(header)
	vec := rb.Vector(fbField(rb, slot) - rb.Pos)
	binary.LittleEndian.PutUint64(header[int(vec)+16*i+8*k:], uint64(v))
}

func patchMsgs(msgs []*flight.FlightData, patch func(header, body []byte)) []*flight.FlightData {
	patch(msgs[1].DataHeader, msgs[1].DataBody)
	return msgs
}

func wideSchema(n int) *arrow.Schema {
	fields := make([]arrow.Field, n)
	for i := range fields {
		fields[i] = arrow.Field{Name: fmt.Sprint("c", i), Type: arrow.PrimitiveTypes.Int8}
	}
	return arrow.NewSchema(fields, nil)
}

func deepSchema(depth int) *arrow.Schema {
	dt := arrow.DataType(arrow.PrimitiveTypes.Int8)
	for range depth - 1 {
		dt = arrow.StructOf(arrow.Field{Name: "s", Type: dt})
	}
	return arrow.NewSchema([]arrow.Field{{Name: "top", Type: dt}}, nil)
}

// Values of the Arrow IPC flatbuffers (format/Message.fbs, Schema.fbs)
// for hand-built hostile headers.
const (
	metadataV5 = 4
	typeInt    = 2
	typeStruct = 13
)

// schemaMessage builds a schema message around the fields vector that
// fields builds, with the flatbuffers builder, which can share tables.
func schemaMessage(fields func(b *flatbuffers.Builder) flatbuffers.UOffsetT) []byte {
	b := flatbuffers.NewBuilder(0)
	vec := fields(b)
	b.StartObject(4)
	b.PrependUOffsetTSlot(1, vec, 0) // Schema.fields
	schema := b.EndObject()
	b.StartObject(5)
	b.PrependInt16Slot(0, metadataV5, 0) // Message.version
	b.PrependByteSlot(1, 1, 0)           // Message.header_type: Schema
	b.PrependUOffsetTSlot(2, schema, 0)  // Message.header
	b.Finish(b.EndObject())
	return b.FinishedBytes()
}

// buildField builds a Field of type typ (its table typeTable) named name
// with children kids (0: none).
func buildField(b *flatbuffers.Builder, name flatbuffers.UOffsetT, typ byte, typeTable, kids flatbuffers.UOffsetT) flatbuffers.UOffsetT {
	b.StartObject(7)
	if name != 0 {
		b.PrependUOffsetTSlot(0, name, 0)
	}
	b.PrependByteSlot(2, typ, 0)
	b.PrependUOffsetTSlot(3, typeTable, 0)
	if kids != 0 {
		b.PrependUOffsetTSlot(5, kids, 0)
	}
	return b.EndObject()
}

func buildVector(b *flatbuffers.Builder, offs ...flatbuffers.UOffsetT) flatbuffers.UOffsetT {
	b.StartVector(4, len(offs), 4)
	for i := len(offs) - 1; i >= 0; i-- {
		b.PrependUOffsetT(offs[i])
	}
	return b.EndVector(len(offs))
}

func buildInt64(b *flatbuffers.Builder) flatbuffers.UOffsetT {
	b.StartObject(2)
	b.PrependInt32Slot(0, 64, 0)
	b.PrependBoolSlot(1, true, false)
	return b.EndObject()
}

// sharedFieldsSchema is a struct of two references to one struct of two
// references to ..., levels deep: 2^levels fields in a few hundred bytes.
func sharedFieldsSchema(levels int) []byte {
	return schemaMessage(func(b *flatbuffers.Builder) flatbuffers.UOffsetT {
		field := buildField(b, 0, typeInt, buildInt64(b), 0)
		for range levels {
			b.StartObject(0)
			st := b.EndObject()
			field = buildField(b, 0, typeStruct, st, buildVector(b, field, field))
		}
		return buildVector(b, field)
	})
}

// sharedNameSchema has n fields that are one field named with size bytes.
func sharedNameSchema(n, size int) []byte {
	return schemaMessage(func(b *flatbuffers.Builder) flatbuffers.UOffsetT {
		field := buildField(b, b.CreateString(strings.Repeat("n", size)), typeInt, buildInt64(b), 0)
		refs := make([]flatbuffers.UOffsetT, n)
		for i := range refs {
			refs[i] = field
		}
		return buildVector(b, refs...)
	})
}

// testShare is a memory share large enough never to wait, for guards
// built without a Service.
func testShare() *membudget.Share {
	b, err := membudget.New(membudget.Options{Limit: 1 << 40, MaxOpenFiles: 1, AdmissionTimeout: time.Minute})
	if err != nil {
		panic(err)
	}
	return b.Share("test", 0)
}

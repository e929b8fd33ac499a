package flightsvc

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// codecSeeds are FlightData messages the fuzzer starts from: the usual
// ones, and the unusual a hostile client may send (repeated and unknown
// fields, a descriptor in two parts).
func codecSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, fd := range []*flight.FlightData{
		{},
		{DataHeader: []byte{1, 2}, DataBody: []byte("body"), AppMetadata: []byte("meta")},
		{FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"events"}}, DataHeader: []byte{9}},
		{FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{"endpoint":"e"}`)}},
	} {
		b, err := proto.Marshal(fd)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	var odd []byte
	odd = protowire.AppendTag(odd, fieldDataBody, protowire.BytesType)
	odd = protowire.AppendBytes(odd, []byte("first"))
	odd = protowire.AppendTag(odd, 7, protowire.VarintType)
	odd = protowire.AppendVarint(odd, 42)
	odd = protowire.AppendTag(odd, fieldDataBody, protowire.BytesType)
	odd = protowire.AppendBytes(odd, []byte("second wins"))
	odd = protowire.AppendTag(odd, fieldFlightDescriptor, protowire.BytesType)
	odd = protowire.AppendBytes(odd, []byte{0x08, 0x01}) // type PATH
	odd = protowire.AppendTag(odd, fieldFlightDescriptor, protowire.BytesType)
	odd = protowire.AppendBytes(odd, []byte{0x1a, 0x01, 'p'}) // path ["p"], merged
	odd = protowire.AppendTag(odd, fieldDataHeader, protowire.VarintType)
	odd = protowire.AppendVarint(odd, 3) // a known number with the wrong type is unknown
	return append(seeds, odd, []byte{0x82}, []byte{0xc2, 0x3e, 0x05, 'a'})
}

// The codec decodes every message as protobuf does — the same fields,
// the same unknown fields, an error where protobuf errs — from the
// frames it arrives in.
func FuzzCodecMatchesProtobuf(f *testing.F) {
	for _, s := range codecSeeds(f) {
		f.Add(s)
	}
	codec := NewCodec()
	f.Fuzz(func(t *testing.T, b []byte) {
		want := new(flight.FlightData)
		wantErr := proto.Unmarshal(b, want)
		got := new(flight.FlightData)
		// As gRPC hands a message over: in frames (here of 1 to 8 bytes).
		var frames mem.BufferSlice
		for rest := b; len(rest) > 0; {
			n := min(len(rest), 1+len(rest)%8)
			frames, rest = append(frames, mem.SliceBuffer(rest[:n])), rest[n:]
		}
		err := codec.Unmarshal(frames, got)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("codec error %v, protobuf error %v", err, wantErr)
		}
		if err != nil {
			return
		}
		if !proto.Equal(got, want) {
			t.Fatalf("codec decoded %v, protobuf %v", got, want)
		}
		if string(got.ProtoReflect().GetUnknown()) != string(want.ProtoReflect().GetUnknown()) {
			t.Fatalf("unknown fields %x, protobuf kept %x", got.ProtoReflect().GetUnknown(), want.ProtoReflect().GetUnknown())
		}
	})
}

// Received batch bytes are not copied out of the message's buffer, and
// messages other than FlightData decode as with gRPC's codec.
func TestCodecAliasesTheMessage(t *testing.T) {
	b, err := proto.Marshal(&flight.FlightData{DataBody: []byte("0123456789")})
	if err != nil {
		t.Fatal(err)
	}
	var fd flight.FlightData
	if err := unmarshalFlightData(b, &fd); err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] = 'X'
	if string(fd.DataBody) != "012345678X" {
		t.Fatalf("data_body %q was copied out of the received buffer", fd.DataBody)
	}

	var desc flight.FlightDescriptor
	b, err = proto.Marshal(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if err := NewCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &desc); err != nil || string(desc.Cmd) != "x" {
		t.Fatalf("descriptor %v, %v", &desc, err)
	}
}

// A message holding more than maxSlack besides its byte fields (unknown
// or repeated fields) has its fields copied out, so that the message can
// be freed: the budget charges a batch its fields. Other messages keep
// aliasing theirs.
func TestCodecOwnsFieldsOfPaddedMessages(t *testing.T) {
	for _, slack := range []int{maxSlack, maxSlack + 1} {
		msg := []byte("[header][body][meta]")
		fd := &flight.FlightData{DataHeader: msg[1:7], DataBody: msg[9:13], AppMetadata: msg[15:19]}
		fields := len(fd.DataHeader) + len(fd.DataBody) + len(fd.AppMetadata)
		ownFields(fd, fields+slack)
		for i := range msg {
			msg[i] = 'X'
		}
		got := string(fd.DataHeader) + string(fd.DataBody) + string(fd.AppMetadata)
		owned := slack > maxSlack
		switch {
		case owned && got != "headerbodymeta":
			t.Fatalf("slack %d: fields %q still alias the message", slack, got)
		case !owned && got != strings.Repeat("X", fields):
			t.Fatalf("slack %d: fields %q were copied", slack, got)
		}
		if owned && cap(fd.DataHeader) != len(fd.DataHeader) {
			t.Fatalf("an append to data_header (cap %d) would write over data_body", cap(fd.DataHeader))
		}
	}
}

// BenchmarkGather: a 1 MiB message of 64 HTTP/2 frames gathered into one
// slice, by gRPC's Materialize (which clears the slice first) and gather.
func BenchmarkGather(b *testing.B) {
	var data mem.BufferSlice
	for range 64 {
		buf := make([]byte, 16<<10)
		data = append(data, mem.SliceBuffer(buf))
	}
	b.SetBytes(int64(data.Len()))
	b.Run("materialize", func(b *testing.B) {
		for b.Loop() {
			_ = data.Materialize()
		}
	})
	b.Run("gather", func(b *testing.B) {
		for b.Loop() {
			_ = gather(data)
		}
	})
}

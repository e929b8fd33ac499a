package lancetable

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/tablepb"
)

// withUnknown returns m's encoding with a varint field 9999 = v appended:
// a field newer than the pinned protos.
func withUnknown(t *testing.T, m proto.Message, v uint64) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	b = protowire.AppendTag(b, 9999, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// unknownValue returns the value of field 9999 in m's unknown fields, -1
// when it is not there.
func unknownValue(m proto.Message) int64 {
	for b := m.ProtoReflect().GetUnknown(); len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return -1
		}
		b = b[n:]
		if num == 9999 && typ == protowire.VarintType {
			v, _ := protowire.ConsumeVarint(b)
			return int64(v)
		}
		b = b[protowire.ConsumeFieldValue(num, typ, b):]
	}
	return -1
}

// TestUnknownFieldsCarriedIntoNextVersion: fields Quiver does not model
// (unknown to the pinned protos, or known but unmodeled such as config)
// in a manifest, a fragment, a data file and a schema field survive
// building the next version, and the per-version ones (tag) do not.
func TestUnknownFieldsCarriedIntoNextVersion(t *testing.T) {
	ls, err := lancefile.FromArrow(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil))
	if err != nil {
		t.Fatal(err)
	}
	base := &Manifest{Schema: *ls, Version: 1, Fragments: []Fragment{{ID: 0, PhysicalRows: 3,
		Files: []DataFile{{Path: "a.lance", Fields: []int32{0}, ColumnIndices: []int32{0}, Major: 2}}}}}
	raw, err := base.encode()
	if err != nil {
		t.Fatal(err)
	}
	p := &tablepb.Manifest{}
	if err := proto.Unmarshal(raw, p); err != nil {
		t.Fatal(err)
	}
	// Plant the unknown fields in each message, then config and a tag.
	for i, m := range []proto.Message{p.Fields[0], p.Fragments[0].Files[0], p.Fragments[0]} {
		if err := proto.Unmarshal(withUnknown(t, m, uint64(i+1)), m); err != nil {
			t.Fatal(err)
		}
	}
	p.Config, p.Tag = map[string]string{"k": "v"}, "v1-tag"
	m, err := decodeManifest(withUnknown(t, p, 4))
	if err != nil {
		t.Fatal(err)
	}

	next, err := build(&Dataset{Manifest: m}, &Transaction{Op: OpAppend}, "x.txn")
	if err != nil {
		t.Fatal(err)
	}
	raw, err = next.encode()
	if err != nil {
		t.Fatal(err)
	}
	got := &tablepb.Manifest{}
	if err := proto.Unmarshal(raw, got); err != nil {
		t.Fatal(err)
	}
	for i, m := range []proto.Message{got.Fields[0], got.Fragments[0].Files[0], got.Fragments[0], got} {
		if v := unknownValue(m); v != int64(i+1) {
			t.Errorf("%s: unknown field 9999 = %d, want %d", m.ProtoReflect().Descriptor().Name(), v, i+1)
		}
	}
	if got.Config["k"] != "v" || next.WriterFlags&FlagTableConfig == 0 {
		t.Errorf("config %v, writer flags %#x: want the config carried and flagged", got.Config, next.WriterFlags)
	}
	if got.Tag != "" || got.Version != 2 {
		t.Errorf("next version %d carries the tag %q of the previous one", got.Version, got.Tag)
	}
}

// TestTransactionOperations: a decoded transaction re-encodes as it was,
// unknown fields included, and an operation newer than the pinned protos
// keeps its number (so the conflict rules refuse it by name).
func TestTransactionOperations(t *testing.T) {
	raw, err := (&Transaction{Op: OpAppend, ReadVersion: 3, UUID: "u", Fragments: []Fragment{{PhysicalRows: 2}}}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	raw = protowire.AppendTag(raw, 9999, protowire.VarintType)
	raw = protowire.AppendVarint(raw, 7)
	txn, err := DecodeTransaction(raw)
	if err != nil || txn.Op != OpAppend || txn.ReadVersion != 3 || len(txn.Fragments) != 1 || txn.Fragments[0].PhysicalRows != 2 {
		t.Fatalf("decoded %+v, %v", txn, err)
	}
	again, err := txn.Encode()
	if err != nil || !proto.Equal(mustTxn(t, again), mustTxn(t, raw)) || unknownValue(mustTxn(t, again)) != 7 {
		t.Errorf("re-encoded transaction differs (%v)", err)
	}

	future := protowire.AppendTag([]byte{8, 1}, 150, protowire.BytesType)
	future = protowire.AppendBytes(future, []byte{8, 1})
	txn, err = DecodeTransaction(future)
	if err != nil || txn.Op != 150 || opName(txn.Op) != "operation #150" {
		t.Errorf("future operation decoded as %d (%v)", txn.Op, err)
	}
	for _, mine := range []protowire.Number{OpAppend, OpUpdate, OpRewrite} {
		if compatible(&Transaction{Op: mine}, txn) {
			t.Errorf("an unknown operation is compatible with a %s", opName(mine))
		}
	}
}

func mustTxn(t *testing.T, b []byte) *tablepb.Transaction {
	t.Helper()
	p := &tablepb.Transaction{}
	if err := proto.Unmarshal(b, p); err != nil {
		t.Fatal(err)
	}
	return p
}

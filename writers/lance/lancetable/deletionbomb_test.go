package lancetable

import (
	"encoding/binary"
	"errors"
	"testing"

	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/quiver-ingest/quiver/writers"
)

// childrenBombDeletionArrow returns a valid .arrow deletion file whose
// footer schema's field claims 2^30 children: arrow-go's reader sizes a
// slice from that count (make([]arrow.Field, n), ~94 GB), which ends the
// process with a fatal out of memory that no recover catches.
func childrenBombDeletionArrow(t testing.TB) []byte {
	b, err := EncodeDeletionArrow([]uint32{1, 5})
	if err != nil {
		t.Fatal(err)
	}
	// File: ... footer | i32 footer length | "ARROW1".
	n := len(b)
	footerLen := int(binary.LittleEndian.Uint32(b[n-10:]))
	footer := b[n-10-footerLen : n-10]
	tab := func(pos flatbuffers.UOffsetT) *flatbuffers.Table {
		return &flatbuffers.Table{Bytes: footer, Pos: pos}
	}
	field := func(t *flatbuffers.Table, slot int) flatbuffers.UOffsetT {
		return flatbuffers.UOffsetT(t.Offset(flatbuffers.VOffsetT(4 + 2*slot)))
	}
	root := tab(flatbuffers.GetUOffsetT(footer))
	schema := tab(root.Indirect(root.Pos + field(root, 1)))
	fields := schema.Vector(field(schema, 1))
	f0 := tab(schema.Indirect(fields))
	off := field(f0, 5) // children
	if off == 0 {
		t.Fatal("the deletion file's field stores no children vector to inflate")
	}
	vec := f0.Vector(off)
	binary.LittleEndian.PutUint32(footer[vec-4:], 1<<30)
	return b
}

func TestDeletionArrowChildrenBomb(t *testing.T) {
	_, err := DecodeDeletionArrow(childrenBombDeletionArrow(t), fragmentRows)
	if !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("err %v, want ErrInvalid", err)
	}
}

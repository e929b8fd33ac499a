package lanceformat

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// TestFullZipHostileHeaders: page header fields another process wrote are
// checked before they size anything or drive the item loop — a visible
// item count beyond the items (which sized a 34 GB allocation, an
// unrecoverable out-of-memory) and values of zero bits (an out-of-range
// read) are errors.
func TestFullZipHostileHeaders(t *testing.T) {
	data := [][]byte{{1, 2}}
	for name, z := range map[string]*encodings21pb.FullZipLayout{
		"visible beyond items": {NumItems: 1, NumVisibleItems: 0xFFFFFFF0,
			Details: &encodings21pb.FullZipLayout_BitsPerOffset{BitsPerOffset: 32}},
		"zero-bit values": {NumItems: 2, NumVisibleItems: 2,
			Details: &encodings21pb.FullZipLayout_BitsPerValue{BitsPerValue: 0}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := decodeFullZip(newBudget(1<<20), z, data); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestEmptyStructRefused: a struct without fields has no leaf column in
// 2.1 and later; writing one is refused naming it (its reader panicked).
func TestEmptyStructRefused(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "empty", Type: arrow.StructOf(), Nullable: true}}, nil)
	for _, minor := range []uint16{1, 2} {
		if err := CheckFormatTypes(s, minor); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "empty") {
			t.Errorf("2.%d: %v, want ErrInvalid naming the column", minor, err)
		}
	}
}

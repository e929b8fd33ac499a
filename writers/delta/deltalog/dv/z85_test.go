package dv

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/uuid"
)

func TestZ85KnownVectors(t *testing.T) {
	dvID := uuid.MustParse("61d16c75-6994-46b7-a15b-8b538852e50e")
	for _, tc := range []struct {
		name    string
		raw     []byte
		encoded string
	}{
		{"ZeroMQ spec HelloWorld", []byte{0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B}, "HelloWorld"},
		{"deletion-vector UUID", dvID[:], "vBn[lx{q8@P<9BNH/isA"},
		{"zeros", make([]byte, 4), "00000"},
		{"max group", []byte{0xFF, 0xFF, 0xFF, 0xFF}, "%nSc0"},
		{"empty", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := z85Encode(tc.raw)
			if err != nil || got != tc.encoded {
				t.Fatalf("encode = %q, %v; want %q", got, err, tc.encoded)
			}
			back, err := z85Decode(tc.encoded)
			if err != nil || !bytes.Equal(back, tc.raw) {
				t.Fatalf("decode = %x, %v; want %x", back, err, tc.raw)
			}
		})
	}
}

func TestZ85Invalid(t *testing.T) {
	if _, err := z85Encode([]byte{1, 2, 3}); !errors.Is(err, errZ85) {
		t.Errorf("encode 3 bytes = %v, want errZ85", err)
	}
	for _, s := range []string{
		"Hell",       // not a multiple of 5
		"Hello Worl", // space is not in the alphabet
		"Hell\"",     // neither is a double quote
		"%nSc1",      // 2^32: overflows the group
		"#####",      // the largest digits overflow too
	} {
		if got, err := z85Decode(s); !errors.Is(err, errZ85) {
			t.Errorf("decode %q = %x, %v; want errZ85", s, got, err)
		}
	}
}

func TestZ85RoundTripAllBytes(t *testing.T) {
	data := make([]byte, 256)
	for i := range data {
		data[i] = byte(255 - i)
	}
	enc, err := z85Encode(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(enc) != 320 {
		t.Fatalf("%d characters, want 320", len(enc))
	}
	back, err := z85Decode(enc)
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("round trip: %v", err)
	}
}

package dv

import (
	"errors"
	"fmt"
)

// Z85 (ZeroMQ RFC 32) turns every 4 bytes, read as a big-endian uint32, into
// 5 characters of base 85, most significant digit first. Delta uses it for
// the UUID of an on-disk deletion vector (16 bytes → 20 characters) and for
// inline deletion vectors, whose bytes it pads with zeros to a multiple of 4
// (the descriptor's sizeInBytes gives the unpadded length).
const z85Alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

// z85Value maps a character to its digit, or -1 for characters outside the
// alphabet.
var z85Value = func() (v [256]int8) {
	for i := range v {
		v[i] = -1
	}
	for i := range len(z85Alphabet) {
		v[z85Alphabet[i]] = int8(i)
	}
	return v
}()

var errZ85 = errors.New("invalid Z85")

// z85Encode encodes data, whose length must be a multiple of 4.
func z85Encode(data []byte) (string, error) {
	if len(data)%4 != 0 {
		return "", fmt.Errorf("%w: %d bytes is not a multiple of 4", errZ85, len(data))
	}
	out := make([]byte, 0, len(data)/4*5)
	for i := 0; i < len(data); i += 4 {
		v := uint32(data[i])<<24 | uint32(data[i+1])<<16 | uint32(data[i+2])<<8 | uint32(data[i+3])
		var digits [5]byte
		for j := 4; j >= 0; j-- {
			digits[j] = z85Alphabet[v%85]
			v /= 85
		}
		out = append(out, digits[:]...)
	}
	return string(out), nil
}

// z85Decode decodes s, whose length must be a multiple of 5. A character
// outside the alphabet or a group above 2^32-1 is an error.
func z85Decode(s string) ([]byte, error) {
	if len(s)%5 != 0 {
		return nil, fmt.Errorf("%w: %d characters is not a multiple of 5", errZ85, len(s))
	}
	out := make([]byte, 0, len(s)/5*4)
	for i := 0; i < len(s); i += 5 {
		var v uint64
		for j := range 5 {
			d := z85Value[s[i+j]]
			if d < 0 {
				return nil, fmt.Errorf("%w: character %q at %d", errZ85, s[i+j], i+j)
			}
			v = v*85 + uint64(d)
		}
		if v > 0xFFFFFFFF {
			return nil, fmt.Errorf("%w: group %q at %d overflows 32 bits", errZ85, s[i:i+5], i)
		}
		out = append(out, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return out, nil
}

package journal

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
)

// MaxRecordBytes caps the type byte plus payload of one record. A length
// word above it is impossible, never allocated or sliced.
const MaxRecordBytes = 64 << 20

// frameHeaderBytes is the length word plus the CRC.
const frameHeaderBytes = 12

// castagnoli is the CRC-32C table of every frame.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one journal entry. The journal does not interpret Type or
// Payload; records read back by Open alias a buffer owned by the caller
// from then on.
type Record struct {
	Type    byte
	Payload []byte
}

// Errors of decodeFrame, sentinels so that decoding never allocates. Open
// turns them into a truncated tail or the Err of a *CorruptionError.
var (
	errZeroLength = errors.New("zero length word")
	errTooLong    = errors.New("impossible length (over 64 MiB)")
	errChecksum   = errors.New("checksum mismatch")
)

// frameSize is the size of the frame of a record of n bytes (type and
// payload), padded so that the next frame starts 8-byte aligned.
func frameSize(n int) int {
	return (frameHeaderBytes + n + 7) &^ 7
}

// appendFrame appends the frame of r to b.
func appendFrame(b []byte, r Record) []byte {
	n := 1 + len(r.Payload)
	start := len(b)
	b = binary.LittleEndian.AppendUint64(b, uint64(n))
	b = append(b, 0, 0, 0, 0) // CRC, filled in below
	b = append(b, r.Type)
	b = append(b, r.Payload...)
	crc := crc32.Update(crc32.Checksum([]byte{r.Type}, castagnoli), castagnoli, r.Payload)
	binary.LittleEndian.PutUint32(b[start+8:], crc)
	for len(b)-start < frameSize(n) {
		b = append(b, 0)
	}
	return b
}

// decodeFrame reads the frame at the start of b. It returns the record,
// whose payload aliases b, and the frame's size including padding. A frame
// (padding included) longer than b is io.ErrUnexpectedEOF. decodeFrame never
// allocates: every length is checked against len(b) before slicing.
func decodeFrame(b []byte) (Record, int, error) {
	if len(b) < 8 {
		return Record{}, 0, io.ErrUnexpectedEOF
	}
	n := binary.LittleEndian.Uint64(b)
	switch {
	case n == 0:
		return Record{}, 0, errZeroLength
	case n > MaxRecordBytes:
		return Record{}, 0, errTooLong
	case uint64(len(b)) < uint64(frameSize(int(n))):
		return Record{}, 0, io.ErrUnexpectedEOF
	}
	body := b[frameHeaderBytes : frameHeaderBytes+n]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[8:]) {
		return Record{}, 0, errChecksum
	}
	return Record{Type: body[0], Payload: body[1:]}, frameSize(int(n)), nil
}

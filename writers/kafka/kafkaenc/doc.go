// Package kafkaenc turns Arrow record batches into Kafka record keys and
// values: JSON values (one object per row, shaped the way a Kafka Connect
// JSON consumer expects), Avro values in the Confluent wire format (magic
// byte 0, 4-byte big-endian schema id, Avro binary body) with the Avro
// schema derived from the Arrow schema, and record keys from a key column.
//
// Encoding is column-wise in the sense that matters for speed: each column
// is bound once per batch to a typed appender (no reflection, no per-row
// type switch), and every row is appended into one reused buffer; the
// records of a batch are sub-slices of it ([Batch]). Which kind of value
// an Arrow type is (integer, timestamp, list, ...) is decided in one place,
// typeOf and columnOf (visitor.go); the JSON and Avro encoders, the Avro
// schema derivation and the key encoder switch over those kinds, so a new
// Arrow type of a known kind is added there alone.
//
// The mapping of every Arrow type is in docs/kafka.md. The package imports
// Arrow, hamba/avro (schema validation) and franz-go's sr (registry
// client); it knows nothing of producers or sinks.
package kafkaenc

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// Batch holds the encoded records of one record batch, row i at
// Row(i). It is reused: Reset keeps the memory. A Batch is not safe for
// concurrent use; rows are valid until the next Reset.
type Batch struct {
	buf  []byte
	ends []int
	null []bool // per row: no bytes at all (a null key)
}

// Reset empties b, keeping its memory.
func (b *Batch) Reset() {
	b.buf = b.buf[:0]
	b.ends = b.ends[:0]
	b.null = b.null[:0]
}

// Len is the number of rows.
func (b *Batch) Len() int { return len(b.ends) }

// Row returns row i's bytes, nil when the row is null.
func (b *Batch) Row(i int) []byte {
	if b.null[i] {
		return nil
	}
	start := 0
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.buf[start:b.ends[i]:b.ends[i]]
}

// Bytes is the total size of all rows.
func (b *Batch) Bytes() int { return len(b.buf) }

func (b *Batch) end(null bool) {
	b.ends = append(b.ends, len(b.buf))
	b.null = append(b.null, null)
}

// Options tune the encodings. The zero value renders ISO-8601 timestamps.
type Options struct {
	// EpochMillis renders JSON timestamps as integer milliseconds since
	// the Unix epoch instead of RFC 3339 text.
	EpochMillis bool
}

// unsupported is the error of a column type a format cannot carry.
func unsupported(format, path string, t arrow.DataType) error {
	return fmt.Errorf("kafkaenc: column %q: type %s is not supported by the %s format", path, t, format)
}

package kafka

import (
	"encoding/json"

	"github.com/quiver-ingest/quiver/writers"
)

// descriptor is the Precommit result: where the durable staging file is
// and what it must hold. Path is "" when nothing was staged. Produced
// counts the records an auto-commit stream sent in its transaction (they
// are not in the file, which holds only its dead-letter records).
type descriptor struct {
	Endpoint string `json:"endpoint"`
	Path     string `json:"path,omitempty"`
	Size     int64  `json:"size"`
	CRC      uint32 `json:"crc"`
	Records  int64  `json:"records"`
	Produced int64  `json:"produced,omitempty"`
}

func (d descriptor) encode() writers.Descriptor {
	b, _ := json.Marshal(d) // cannot fail: plain fields
	return b
}

func decodeDescriptor(endpoint string, i int, b writers.Descriptor) (descriptor, error) {
	var d descriptor
	if err := json.Unmarshal(b, &d); err != nil {
		return d, writers.Errorf(writers.ErrInvalid, "kafka: descriptor %d is not a Kafka descriptor (%w): hand over only descriptors precommitted by a Kafka endpoint", i, err)
	}
	if d.Endpoint != endpoint {
		return d, writers.Errorf(writers.ErrInvalid, "kafka: descriptor %d was precommitted by endpoint %q, not %q: Kafka endpoints commit only their own descriptors", i, d.Endpoint, endpoint)
	}
	if d.Records > 0 && d.Path == "" {
		return d, writers.Errorf(writers.ErrInvalid, "kafka: descriptor %d has %d records but no staging file", i, d.Records)
	}
	return d, nil
}

package lanceformat

import (
	"google.golang.org/protobuf/proto"

	"github.com/quiver-ingest/quiver/writers"
)

// marshal encodes m deterministically (map entries sorted by key). Proto3
// strings must be UTF-8: a name or key that is not is ErrInvalid.
func marshal(m proto.Message) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, writers.Errorf(writers.ErrInvalid, "lance: encode %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return b, nil
}

// unmarshal decodes b into m. Fields the pinned protos do not know stay in
// m's unknown fields and are written again by marshal.
func unmarshal(b []byte, m proto.Message) error { return proto.Unmarshal(b, m) }

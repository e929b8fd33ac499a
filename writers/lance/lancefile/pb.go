package lancefile

import (
	"google.golang.org/protobuf/proto"

	"github.com/quiver-ingest/quiver/writers"
)

// Marshal encodes m deterministically (map entries sorted by key). Proto3
// strings must be UTF-8: a name or key that is not is ErrInvalid.
func Marshal(m proto.Message) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, writers.Errorf(writers.ErrInvalid, "lance: encode %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return b, nil
}

// Unmarshal decodes b into m. Fields the pinned protos do not know stay in
// m's unknown fields and are written again by Marshal.
func Unmarshal(b []byte, m proto.Message) error { return proto.Unmarshal(b, m) }

// CloneOr returns a copy of m, the message a value was decoded from (so
// that what Quiver does not model, unknown fields included, is carried
// into what it encodes), or a new message when there is none.
func CloneOr[M interface {
	*T
	proto.Message
}, T any](m M) M {
	if m == nil {
		return new(T)
	}
	return proto.CloneOf(m)
}

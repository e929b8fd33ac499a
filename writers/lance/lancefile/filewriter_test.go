package lancefile

import (
	"errors"
	"testing"

	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/file2pb"
)

// TestColumnMetadataEncodingError: a page encoding that cannot be wrapped
// is an error, not a page without an encoding.
func TestColumnMetadataEncodingError(t *testing.T) {
	boom := errors.New("boom")
	real := directEncoding
	t.Cleanup(func() { directEncoding = real })
	directEncoding = func(typeURL string, msg []byte) (*file2pb.Encoding, error) {
		if typeURL == typeColumnEncoding {
			return real(typeURL, msg)
		}
		return nil, boom
	}
	for name, p := range map[string]pageRef{
		"2.0": {length: 1, enc: flatEnc(32, 0)},
		"2.1": {length: 1, layout: &encodings21pb.PageLayout{}},
	} {
		if _, err := columnMetadata([]pageRef{p}); !errors.Is(err, boom) {
			t.Errorf("%s page: columnMetadata error = %v, want %v", name, err, boom)
		}
	}
}

package deltalog

import (
	"fmt"
	"net/url"
	"strings"
)

// EncodePath turns a storage key relative to the table root into add.path:
// each '/'-separated segment is URL-path-escaped (so the Hive escapes of
// PartitionDir stack: "%2F" becomes "%252F").
func EncodePath(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// DecodePath turns add.path into the storage key relative to the table
// root, decoding percent-escapes exactly once. Absolute URIs (with a
// scheme) are refused with ErrUnsupported: Quiver reads only files under the
// table root.
func DecodePath(path string) (string, error) {
	if u, err := url.Parse(path); err == nil && u.Scheme != "" {
		return "", fmt.Errorf("delta: absolute file path %q: %w", path, ErrUnsupported)
	}
	key, err := url.PathUnescape(path)
	if err != nil {
		return "", fmt.Errorf("delta: file path %q: %w: %w", path, ErrCorrupt, err)
	}
	return key, nil
}

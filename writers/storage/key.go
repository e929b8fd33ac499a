package storage

import (
	"strings"

	"github.com/quiver-ingest/quiver/writers"
)

// CheckKey refuses keys that would not name the same object on every
// scheme: gocloud drivers escape control characters, "../" and trailing
// slashes differently, and a filesystem cannot hold "a" and "a/b" at once
// anyway. Table layouts never need such keys. Every Bucket method applies
// it; sinks apply it to the keys a descriptor names before trusting them.
// The error wraps writers.ErrInvalid and does not repeat the key.
func CheckKey(key string) error {
	if key == "" {
		return writers.Errorf(writers.ErrInvalid, "empty key")
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return writers.Errorf(writers.ErrInvalid, "key has an empty, \".\" or \"..\" segment; use a clean relative path")
		}
		if isTempName(seg) {
			return writers.Errorf(writers.ErrInvalid, "key segment %q looks like a storage temporary file", seg)
		}
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return writers.Errorf(writers.ErrInvalid, "key has a control character or backslash")
		}
	}
	return nil
}

// checkPrefix accepts "" and any prefix of a valid key (a trailing '/' and
// a partial last segment included).
func checkPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return CheckKey(prefix + "x")
}

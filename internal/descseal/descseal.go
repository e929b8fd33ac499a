// Package descseal seals transaction descriptors with an HMAC-SHA256, so
// that a server accepts in a commit only descriptors that a server of the
// same deployment (sharing the descriptor key) precommitted for the same
// endpoint and transaction.
//
// Descriptors are client input once they leave the server: a client could
// edit one, or hand one precommitted for endpoint A to endpoint B, or for
// one transaction to another. Sinks trust their descriptors (file lists,
// staged record locations), so the server verifies them before a commit.
// The journal and the sinks keep the raw descriptors; only the wire form is
// sealed.
//
// Envelope (docs/transactions.md, "Sealed descriptors"):
//
//	version (1 byte, 2) | tag (32 bytes) | len(attempt) (1 byte) | attempt | raw descriptor
//
// tag = HMAC-SHA256(key, "quiver descriptor v2" 0x00 | len(endpoint) u32 |
// endpoint | len(writer) u32 | writer | epoch u64 | len(attempt) u32 |
// attempt | raw descriptor), all integers big-endian; the length
// prefixes keep names that contain any byte unambiguous. The attempt is
// the transaction attempt that precommitted the descriptor: a server
// refuses descriptors of an attempt it fenced or rolled back. Version 1
// (before attempts) has no attempt, and "quiver descriptor v1" as its
// domain; it is still read.
//
// The package knows no server and no sink; it only depends on the standard
// library.
package descseal

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
)

// Version is the envelope version this package writes; it reads it and
// version 1 (before attempts: no attempt, another domain string).
const Version byte = 2

const versionNoAttempt byte = 1

// tagBytes is the length of the HMAC-SHA256 tag.
const tagBytes = sha256.Size

// maxAttemptBytes bounds an attempt id in an envelope (one length byte).
const maxAttemptBytes = 255

// domains separate descriptor tags from any other use of the key, and
// the two envelope versions from each other.
var domains = map[byte]string{versionNoAttempt: "quiver descriptor v1\x00", Version: "quiver descriptor v2\x00"}

// Scope is what a sealed descriptor is bound to: the endpoint whose sink
// precommitted it, the transaction it belongs to and the attempt of that
// transaction that precommitted it.
type Scope struct {
	Endpoint string
	Writer   string
	Epoch    int64
	// Attempt travels in the envelope (Open returns it): a server that
	// did not precommit the descriptor cannot know it.
	Attempt string
}

// ErrUnverified is wrapped by every error of [Key.Open].
var ErrUnverified = errors.New("descriptor not verified")

// Seal returns the envelope of desc bound to s. An attempt longer than
// 255 bytes panics: attempt ids are the server's own, 16 hex digits.
func (k Key) Seal(s Scope, desc []byte) []byte {
	if len(s.Attempt) > maxAttemptBytes {
		panic("descseal: attempt id too long")
	}
	out := make([]byte, 0, 2+tagBytes+len(s.Attempt)+len(desc))
	out = append(out, Version)
	out = k.tag(Version, s, desc).Sum(out)
	out = append(out, byte(len(s.Attempt)))
	out = append(out, s.Attempt...)
	return append(out, desc...)
}

// Open verifies sealed against s (its Attempt ignored) in constant time
// and returns the raw descriptor it carries (a sub-slice of sealed) and
// the attempt it was sealed for ("" for a version 1 envelope). Errors
// wrap ErrUnverified and say why, never revealing the expected tag.
func (k Key) Open(s Scope, sealed []byte) (desc []byte, attempt string, err error) {
	if len(sealed) < 1+tagBytes {
		return nil, "", fmt.Errorf("%w: %d bytes is too short for a sealed descriptor (a raw sink descriptor, or truncated)", ErrUnverified, len(sealed))
	}
	version, tag, rest := sealed[0], sealed[1:1+tagBytes], sealed[1+tagBytes:]
	switch version {
	case versionNoAttempt:
		desc = rest
	case Version:
		if len(rest) < 1 || len(rest) < 1+int(rest[0]) {
			return nil, "", fmt.Errorf("%w: the envelope is truncated inside its attempt id", ErrUnverified)
		}
		attempt, desc = string(rest[1:1+int(rest[0])]), rest[1+int(rest[0]):]
	default:
		return nil, "", fmt.Errorf("%w: unknown envelope version %d (this server reads versions %d and %d)", ErrUnverified, version, versionNoAttempt, Version)
	}
	s.Attempt = attempt
	if !hmac.Equal(tag, k.tag(version, s, desc).Sum(nil)) {
		return nil, "", fmt.Errorf("%w: its MAC does not match: it was edited, precommitted for another endpoint or transaction, or sealed by a server with another descriptor key", ErrUnverified)
	}
	return desc, attempt, nil
}

// tag returns the HMAC of s and desc in envelope version, not yet summed.
func (k Key) tag(version byte, s Scope, desc []byte) hash.Hash {
	if k.IsZero() {
		// A zero Key would make every tag forgeable.
		panic("descseal: zero Key")
	}
	m := hmac.New(sha256.New, k.secret)
	var n [8]byte
	m.Write([]byte(domains[version]))
	binary.BigEndian.PutUint32(n[:4], uint32(len(s.Endpoint)))
	m.Write(n[:4])
	m.Write([]byte(s.Endpoint))
	binary.BigEndian.PutUint32(n[:4], uint32(len(s.Writer)))
	m.Write(n[:4])
	m.Write([]byte(s.Writer))
	binary.BigEndian.PutUint64(n[:], uint64(s.Epoch))
	m.Write(n[:])
	if version != versionNoAttempt {
		binary.BigEndian.PutUint32(n[:4], uint32(len(s.Attempt)))
		m.Write(n[:4])
		m.Write([]byte(s.Attempt))
	}
	m.Write(desc)
	return m
}

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
//	version (1 byte, 1) | tag (32 bytes) | raw descriptor
//
// tag = HMAC-SHA256(key, "quiver descriptor v1" 0x00 | len(endpoint) u32 |
// endpoint | len(writer) u32 | writer | epoch u64 | raw descriptor), all
// integers big-endian; the length prefixes keep names that contain any
// byte unambiguous.
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

// Version is the envelope version this package writes and reads.
const Version byte = 1

// tagBytes is the length of the HMAC-SHA256 tag.
const tagBytes = sha256.Size

// domain separates descriptor tags from any other use of the key.
const domain = "quiver descriptor v1\x00"

// Scope is what a sealed descriptor is bound to: the endpoint whose sink
// precommitted it and the transaction it belongs to.
type Scope struct {
	Endpoint string
	Writer   string
	Epoch    int64
}

// ErrUnverified is wrapped by every error of [Key.Open].
var ErrUnverified = errors.New("descriptor not verified")

// Seal returns the envelope of desc bound to s.
func (k Key) Seal(s Scope, desc []byte) []byte {
	out := make([]byte, 0, 1+tagBytes+len(desc))
	out = append(out, Version)
	out = k.tag(s, desc).Sum(out)
	return append(out, desc...)
}

// Open verifies sealed against s in constant time and returns the raw
// descriptor it carries (a sub-slice of sealed). Errors wrap ErrUnverified
// and say why, never revealing the expected tag.
func (k Key) Open(s Scope, sealed []byte) ([]byte, error) {
	if len(sealed) < 1+tagBytes {
		return nil, fmt.Errorf("%w: %d bytes is too short for a sealed descriptor (a raw sink descriptor, or truncated)", ErrUnverified, len(sealed))
	}
	if sealed[0] != Version {
		return nil, fmt.Errorf("%w: unknown envelope version %d (this server reads version %d)", ErrUnverified, sealed[0], Version)
	}
	tag, desc := sealed[1:1+tagBytes], sealed[1+tagBytes:]
	if !hmac.Equal(tag, k.tag(s, desc).Sum(nil)) {
		return nil, fmt.Errorf("%w: its MAC does not match: it was edited, precommitted for another endpoint or transaction, or sealed by a server with another descriptor key", ErrUnverified)
	}
	return desc, nil
}

// tag returns the HMAC of s and desc, not yet summed.
func (k Key) tag(s Scope, desc []byte) hash.Hash {
	if k.IsZero() {
		// A zero Key would make every tag forgeable.
		panic("descseal: zero Key")
	}
	m := hmac.New(sha256.New, k.secret)
	var n [8]byte
	m.Write([]byte(domain))
	binary.BigEndian.PutUint32(n[:4], uint32(len(s.Endpoint)))
	m.Write(n[:4])
	m.Write([]byte(s.Endpoint))
	binary.BigEndian.PutUint32(n[:4], uint32(len(s.Writer)))
	m.Write(n[:4])
	m.Write([]byte(s.Writer))
	binary.BigEndian.PutUint64(n[:], uint64(s.Epoch))
	m.Write(n[:])
	m.Write(desc)
	return m
}

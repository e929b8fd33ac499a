package descseal

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/quiver-ingest/quiver/internal/fsync"
)

// MinKeyBytes is the shortest key accepted: 256 bits, the HMAC-SHA256
// block's worth of security.
const MinKeyBytes = 32

// maxKeyFileBytes bounds what ReadKeyFile reads: a key file is a line of
// hex, and a path pointing at something huge must not be read whole.
const maxKeyFileBytes = 4096

// Key is a descriptor key. The zero Key is not usable; build one with
// [NewKey], [ParseKey], [GenerateKey] or a key file.
type Key struct{ secret []byte }

// NewKey returns a key of secret (copied), which must hold at least
// MinKeyBytes bytes.
func NewKey(secret []byte) (Key, error) {
	if len(secret) < MinKeyBytes {
		return Key{}, fmt.Errorf("descriptor key has %d bytes, need at least %d (%d hex digits)", len(secret), MinKeyBytes, 2*MinKeyBytes)
	}
	return Key{secret: bytes.Clone(secret)}, nil
}

// GenerateKey returns a random key of MinKeyBytes bytes.
func GenerateKey() Key {
	secret := make([]byte, MinKeyBytes)
	rand.Read(secret) // never fails: crypto/rand crashes the program instead
	return Key{secret: secret}
}

// IsZero reports whether k is the zero Key.
func (k Key) IsZero() bool { return len(k.secret) == 0 }

// ParseKey parses the key file format: the key in hexadecimal, at least
// 2*MinKeyBytes digits, surrounding whitespace (a trailing newline)
// ignored. Errors never quote the text, which is secret.
func ParseKey(text []byte) (Key, error) {
	text = bytes.TrimSpace(text)
	secret := make([]byte, hex.DecodedLen(len(text)))
	if _, err := hex.Decode(secret, text); err != nil {
		return Key{}, errors.New("descriptor key is not hexadecimal")
	}
	return NewKey(secret)
}

// ReadKeyFile reads a key file (format: [ParseKey]). Errors name the file.
func ReadKeyFile(path string) (Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return Key{}, err
	}
	defer f.Close()
	text, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return Key{}, fmt.Errorf("read %s: %w", path, err)
	}
	if len(text) > maxKeyFileBytes {
		return Key{}, fmt.Errorf("%s is larger than %d bytes: not a descriptor key file", path, maxKeyFileBytes)
	}
	k, err := ParseKey(text)
	if err != nil {
		return Key{}, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// LoadOrCreateKeyFile reads the key file at path, or, when there is none,
// creates it with a random key: written to a temporary file (mode 0600)
// in the same folder, synced, then linked into place, so that the file
// never exists half-written and an existing key is never replaced. The
// folder must exist.
func LoadOrCreateKeyFile(path string) (Key, error) {
	k, err := ReadKeyFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	k = GenerateKey()
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".descriptor-key-*") // mode 0600
	if err != nil {
		return Key{}, fmt.Errorf("create the descriptor key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(hex.EncodeToString(k.secret) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Key{}, fmt.Errorf("write the descriptor key %s: %w", tmp.Name(), err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		// Created meanwhile: that one is the key.
		return ReadKeyFile(path)
	} else if err != nil {
		return Key{}, fmt.Errorf("create the descriptor key %s: %w", path, err)
	}
	if err := fsync.Dir(dir); err != nil {
		return Key{}, fmt.Errorf("create the descriptor key %s: %w", path, err)
	}
	return k, nil
}

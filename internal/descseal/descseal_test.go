package descseal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func testKey(t *testing.T, b byte) Key {
	t.Helper()
	k, err := NewKey(bytes.Repeat([]byte{b}, MinKeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	k := testKey(t, 1)
	s := Scope{Endpoint: "events", Writer: "job", Epoch: 7, Attempt: "0123456789abcdef"}
	raw := []byte("add part-0001.parquet")
	sealed := k.Seal(s, raw)
	if sealed[0] != Version || len(sealed) != 2+tagBytes+len(s.Attempt)+len(raw) {
		t.Fatalf("envelope %x", sealed)
	}
	// The verifier need not know the attempt: the envelope says it.
	got, attempt, err := k.Open(Scope{Endpoint: "events", Writer: "job", Epoch: 7}, sealed)
	if err != nil || !bytes.Equal(got, raw) || attempt != s.Attempt {
		t.Fatalf("Open = %q, %q, %v", got, attempt, err)
	}
	if got, _, err := k.Open(s, k.Seal(s, nil)); err != nil || len(got) != 0 {
		t.Fatalf("empty descriptor: %q, %v", got, err)
	}
}

// TestOpenVersion1: envelopes sealed before attempts existed (version 1:
// no attempt, the v1 domain) still open, with no attempt.
func TestOpenVersion1(t *testing.T) {
	k := testKey(t, 1)
	s := Scope{Endpoint: "events", Writer: "job", Epoch: 7}
	raw := []byte("add part-0001.parquet")
	v1 := k.tag(versionNoAttempt, s, raw).Sum([]byte{versionNoAttempt})
	v1 = append(v1, raw...)
	got, attempt, err := k.Open(s, v1)
	if err != nil || !bytes.Equal(got, raw) || attempt != "" {
		t.Fatalf("Open(v1) = %q, %q, %v", got, attempt, err)
	}
}

func TestOpenRefuses(t *testing.T) {
	k := testKey(t, 1)
	s := Scope{Endpoint: "events", Writer: "job", Epoch: 7, Attempt: "a1"}
	sealed := k.Seal(s, []byte("payload"))
	edit := func(i int) []byte {
		b := bytes.Clone(sealed)
		b[i] ^= 1
		return b
	}
	cases := []struct {
		name   string
		key    Key
		scope  Scope
		sealed []byte
		msg    string
	}{
		{"edited payload", k, s, edit(len(sealed) - 1), "MAC does not match"},
		{"edited tag", k, s, edit(5), "MAC does not match"},
		{"edited attempt", k, s, edit(1 + tagBytes + 1), "MAC does not match"},
		{"another endpoint", k, Scope{"users", "job", 7, ""}, sealed, "MAC does not match"},
		{"another writer", k, Scope{"events", "job2", 7, ""}, sealed, "MAC does not match"},
		{"another epoch", k, Scope{"events", "job", 8, ""}, sealed, "MAC does not match"},
		// Length prefixes: moving a byte between endpoint and writer
		// changes the tag.
		{"shifted names", k, Scope{"event", "sjob", 7, ""}, sealed, "MAC does not match"},
		{"attempt length past the end", k, s, append(bytes.Clone(sealed[:1+tagBytes]), 200, 'x'), "truncated inside its attempt"},
		{"another key", testKey(t, 2), s, sealed, "MAC does not match"},
		{"raw descriptor", k, s, []byte("payload"), "too short"},
		{"unknown version", k, s, append([]byte{3}, sealed[1:]...), "unknown envelope version 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tc.key.Open(tc.scope, tc.sealed)
			if !errors.Is(err, ErrUnverified) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Open: %v, want ErrUnverified saying %q", err, tc.msg)
			}
		})
	}
}

func TestParseKey(t *testing.T) {
	hex64 := strings.Repeat("ab", MinKeyBytes)
	if _, err := ParseKey([]byte("  " + hex64 + "\n")); err != nil {
		t.Fatalf("64 hex digits with whitespace: %v", err)
	}
	for name, text := range map[string]string{
		"short":   strings.Repeat("ab", MinKeyBytes-1),
		"not hex": strings.Repeat("zz", MinKeyBytes),
		"raw":     strings.Repeat("k", 2*MinKeyBytes),
		"empty":   "",
	} {
		if _, err := ParseKey([]byte(text)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), text) && text != "" {
			t.Errorf("%s: the error quotes the secret: %v", name, err)
		}
	}
}

func TestLoadOrCreateKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "descriptor.key")
	k1, err := LoadOrCreateKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v, %v: want mode 0600", fi, err)
	}
	k2, err := LoadOrCreateKeyFile(path)
	if err != nil || !bytes.Equal(k1.secret, k2.secret) {
		t.Fatalf("second load: %v; key reused = %v", err, bytes.Equal(k1.secret, k2.secret))
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Fatalf("folder holds %v, want only the key", ents)
	}
	// Concurrent first starts agree on one key.
	path = filepath.Join(t.TempDir(), "descriptor.key")
	keys := make([]Key, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			var err error
			if keys[i], err = LoadOrCreateKeyFile(path); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if !bytes.Equal(k.secret, keys[0].secret) {
			t.Fatal("concurrent creations returned different keys")
		}
	}
}

func TestReadKeyFileRefuses(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abcd\n"), 0o600)
	huge := filepath.Join(dir, "huge")
	os.WriteFile(huge, bytes.Repeat([]byte("a"), maxKeyFileBytes+2), 0o600)
	for path, msg := range map[string]string{
		short:                      "need at least 32",
		huge:                       "larger than",
		filepath.Join(dir, "none"): "no such file",
	} {
		if _, err := ReadKeyFile(path); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ReadKeyFile(%s): %v, want %q", path, err, msg)
		}
	}
	// A malformed existing file is reported, never replaced.
	if _, err := LoadOrCreateKeyFile(short); err == nil {
		t.Fatal("LoadOrCreateKeyFile replaced a short key")
	}
}

package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/quiver-ingest/quiver/internal/emulator"
)

// largeObject is bigger than one part of every cloud driver's upload
// (S3 5 MiB parts, GCS 16 MiB chunks, Azure blocks), so that writing it
// takes a multipart upload.
const largeObject = 17<<20 + 12345

// TestLargeObjects writes objects needing multipart uploads on each
// emulated store: streamed with NewWriter, and with PutIfAbsent, whose
// condition must hold for the multipart completion too (a second
// PutIfAbsent of the key loses and changes nothing).
func TestLargeObjects(t *testing.T) {
	data := make([]byte, largeObject)
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(data)
	for _, e := range emulator.All() {
		t.Run(e.Name, func(t *testing.T) {
			b := mustOpen(t, e.Start(t).Table(t), Options{})
			ctx := t.Context()
			w, err := b.NewWriter(ctx, "big/part-0.parquet")
			if err != nil {
				t.Fatal(err)
			}
			for chunk := range slicesChunk(data, 1<<20) {
				if _, err := w.Write(chunk); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			wantLarge(t, b, "big/part-0.parquet", data)

			if err := b.PutIfAbsent(ctx, "big/manifest", data); err != nil {
				t.Fatalf("PutIfAbsent of %d bytes: %v", len(data), err)
			}
			other := bytes.Repeat([]byte{7}, len(data))
			if err := b.PutIfAbsent(ctx, "big/manifest", other); !errors.Is(err, ErrAlreadyExists) {
				t.Fatalf("second PutIfAbsent of %d bytes: err = %v, want ErrAlreadyExists", len(other), err)
			}
			wantLarge(t, b, "big/manifest", data)
		})
	}
}

// slicesChunk yields data in pieces of n bytes.
func slicesChunk(data []byte, n int) func(func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for len(data) > 0 {
			k := min(n, len(data))
			if !yield(data[:k]) {
				return
			}
			data = data[k:]
		}
	}
}

// wantLarge checks that key holds exactly want, by Stat and by Get.
func wantLarge(t *testing.T, b *Bucket, key string, want []byte) {
	t.Helper()
	o, err := b.Stat(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if o.Size != int64(len(want)) {
		t.Fatalf("Stat(%q).Size = %d, want %d", key, o.Size, len(want))
	}
	got, err := b.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q): %d bytes differ from the %d written", key, len(got), len(want))
	}
}

// TestMissingBucket: a root in a bucket that does not exist fails to open
// with an error that says so, naming the root, on every emulated store.
func TestMissingBucket(t *testing.T) {
	for _, e := range emulator.All() {
		t.Run(e.Name, func(t *testing.T) {
			uri := e.Start(t).URI("no-such-bucket", "t")
			b, err := Open(t.Context(), uri, Options{})
			if err == nil {
				b.Close()
				t.Fatalf("Open(%q) succeeded", uri)
			}
			if !errors.Is(err, ErrNoBucket) || !strings.Contains(err.Error(), "no-such-bucket") {
				t.Fatalf("Open(%q): err = %v, want ErrNoBucket naming the bucket", uri, err)
			}
		})
	}
}

// TestWrongCredentials: a store that refuses the credentials fails Open
// with writers.ErrUnauthenticated or ErrPermissionDenied, naming the root,
// not as a missing bucket or a transient failure: Azurite with a wrong
// shared key, and moto with its IAM authentication on
// (emulator.S3WithAuth) with an unknown key id or a wrong secret, while
// its own key opens the same root. fake-gcs-server checks no credentials
// at all (and the GCS client sends none to an emulator), so gs:// has no
// such case. Each root is opened by a child process
// (wrongCredsProcess) with the credentials in its environment, since
// gocloud reads Azure's settings once per process.
func TestWrongCredentials(t *testing.T) {
	s3 := emulator.S3WithAuth(t)
	s3URI := s3.URI(emulator.AuthBucket, "t")
	azure := emulator.Azure(t)
	for _, c := range []struct {
		name string
		uri  string
		env  []string // the store's, then these
		open bool     // the credentials are right
	}{
		{"s3/right key", s3URI, nil, true},
		{"s3/unknown key id", s3URI, []string{"AWS_ACCESS_KEY_ID=AKIAQUIVERUNKNOWNKEY"}, false},
		{"s3/wrong secret", s3URI, []string{"AWS_SECRET_ACCESS_KEY=wrong-secret"}, false},
		{"azblob/wrong key", azure.Table(t), []string{"AZURE_STORAGE_KEY=AAAA" + emulator.AzureKey[4:]}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
			want := "refused"
			if c.open {
				want = "open"
			}
			env := append(s3.Env(), azure.Env()...)
			cmd.Env = append(append(append(os.Environ(), env...), c.env...), wrongCredsEnv+"="+c.uri, wantEnv+"="+want)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			t.Logf("child: %s", out)
		})
	}
}

// wrongCredsEnv makes TestMain run wrongCredsProcess on this root;
// wantEnv says what it expects: "open" or "refused".
const (
	wrongCredsEnv = "QUIVER_STORAGE_WRONG_CREDS"
	wantEnv       = "QUIVER_STORAGE_WANT"
)

// wrongCredsProcess is the child of TestWrongCredentials: it exits 0 when
// opening the root goes as expected.
func wrongCredsProcess() int {
	uri := os.Getenv(wrongCredsEnv)
	b, err := Open(context.Background(), uri, Options{})
	if os.Getenv(wantEnv) == "open" {
		if err != nil {
			fmt.Fprintf(os.Stderr, "Open with the right credentials: %v\n", err)
			return 1
		}
		b.Close()
		fmt.Println("opened")
		return 0
	}
	if err == nil || !refused(err) || errors.Is(err, ErrNoBucket) || !strings.Contains(err.Error(), uri) {
		fmt.Fprintf(os.Stderr, "Open with wrong credentials: err = %v, want a refusal (unauthenticated or permission denied) naming the root\n", err)
		return 1
	}
	fmt.Println(err)
	return 0
}

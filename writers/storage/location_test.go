package storage

import (
	"path/filepath"
	"testing"
)

// Location names one storage location the same however its URI is
// spelled (a transaction may write a table through one endpoint only, and
// two endpoints' URIs are compared by it), and two locations apart.
func TestLocation(t *testing.T) {
	base := t.TempDir()
	same := [][]string{
		{"s3://bucket/t", "s3://bucket/t/", "s3://bucket/t?region=eu-west-1", "s3://bucket//t/?endpoint=http://x&region=y"},
		{"file://" + filepath.Join(base, "t"), "file://t", "file://./t/", "file://" + base + "/x/../t"},
		{"mem://b/t", "mem://b/t/"},
	}
	seen := map[string]bool{}
	for _, uris := range same {
		want, err := Location(uris[0], Options{BaseDir: base})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range uris[1:] {
			if got, err := Location(u, Options{BaseDir: base}); err != nil || got != want {
				t.Fatalf("Location(%q) = %q, %v; want %q (as %q)", u, got, err, want, uris[0])
			}
		}
		if seen[want] {
			t.Fatalf("two locations named %q", want)
		}
		seen[want] = true
	}
	if a, _ := Location("s3://bucket/t", Options{}); a == mustLocation(t, "s3://bucket/u") || a == mustLocation(t, "gs://bucket/t") {
		t.Fatalf("different tables named %q", a)
	}
}

func mustLocation(t *testing.T, uri string) string {
	t.Helper()
	l, err := Location(uri, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

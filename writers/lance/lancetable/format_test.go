package lancetable

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/internal/lancetest"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
)

func TestManifestNames(t *testing.T) {
	cases := []struct {
		v      uint64
		naming Naming
		key    string
	}{
		{1, NamingV2, "_versions/18446744073709551614.manifest"},
		{4, NamingV2, "_versions/18446744073709551611.manifest"},
		{1, NamingV1, "_versions/1.manifest"},
		{12, NamingV1, "_versions/12.manifest"},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			if got := ManifestKey(tc.v, tc.naming); got != tc.key {
				t.Fatalf("ManifestKey = %s", got)
			}
			v, n, ok := parseManifestName(filepath.Base(tc.key))
			if !ok || v != tc.v || n != tc.naming {
				t.Fatalf("parse = %d %d %v", v, n, ok)
			}
		})
	}
	for _, bad := range []string{".tmp_x", "d123.manifest", "latest_version_hint.json", "x.manifest"} {
		if _, _, ok := parseManifestName(bad); ok {
			t.Errorf("%s parsed as a manifest", bad)
		}
	}
}

func TestDeletionFilesRoundTrip(t *testing.T) {
	cases := map[string][]uint32{
		"few":      {3, 1, 7},
		"dups":     {7, 3, 3, 1, 7},
		"two-keys": {1, 65535, 65536, 200000},
		"bitmap-dense": func() []uint32 {
			var v []uint32
			for i := range uint32(5000) {
				v = append(v, i*2)
			}
			return v
		}(),
	}
	for name, offs := range cases {
		t.Run(name, func(t *testing.T) {
			want := slices.Compact(slices.Sorted(slices.Values(offs)))
			in := slices.Clone(offs)
			got, err := DecodeDeletionBitmap(EncodeDeletionBitmap(offs), 1<<32)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("bitmap: %v %v", got, err)
			}
			if !slices.Equal(offs, in) {
				t.Fatalf("EncodeDeletionBitmap modified its input: %v, was %v", offs, in)
			}
			a, err := EncodeDeletionArrow(offs)
			if err != nil {
				t.Fatal(err)
			}
			got, err = DecodeDeletionArrow(a, 1<<32)
			if err != nil || !slices.Equal(got, offs) {
				t.Fatalf("arrow: %v %v", got, err)
			}
		})
	}
}

// TestRefusals: datasets Quiver cannot write are refused with ErrInvalid.
func TestRefusals(t *testing.T) {
	cases := []struct {
		name string
		m    Manifest
	}{
		{"stable-row-ids", Manifest{ReaderFlags: FlagStableRowIDs}},
		{"unknown-flag", Manifest{WriterFlags: 64}},
		{"format-next", Manifest{FormatVersion: "2.3"}},
		{"format-legacy", Manifest{FormatVersion: "0.1"}},
		{"file-next", Manifest{Fragments: []Fragment{{Files: []DataFile{{Path: "x", Major: 2, Minor: 3}}}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &Dataset{Manifest: &tc.m}
			if err := d.CheckWritable(); !errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("CheckWritable = %v, want ErrInvalid", err)
			}
		})
	}
}

// TestCommitRebase: a writer whose base is stale rebases its append over
// a concurrent append, and fails with ErrConflict over an overwrite.
func TestCommitRebase(t *testing.T) {
	ctx := context.Background()
	b := openDir(t, t.TempDir())
	ls, _ := lancefile.FromArrow(lancetest.AllTypesSchema())
	frag := Fragment{PhysicalRows: 0}
	v1, err := Commit(ctx, b, nil, &Transaction{Op: OpOverwrite, Schema: ls})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Commit(ctx, b, v1, &Transaction{Op: OpAppend, Fragments: []Fragment{frag}}); err != nil {
		t.Fatal(err)
	}
	v3, err := Commit(ctx, b, v1, &Transaction{Op: OpAppend, Fragments: []Fragment{frag}})
	if err != nil {
		t.Fatalf("stale append did not rebase: %v", err)
	}
	if v3.Version() != 3 || len(v3.Manifest.Fragments) != 2 || v3.Manifest.Fragments[1].ID != 1 {
		t.Fatalf("rebased version %d with fragments %+v", v3.Version(), v3.Manifest.Fragments)
	}
	// A concurrent Overwrite: the stale append must not rebase over it.
	raw, err := (&Transaction{Op: OpOverwrite, Schema: ls, UUID: "x"}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := build(v3, &Transaction{Op: OpOverwrite, Schema: ls}, "")
	file, err := encodeManifestFile(m, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, ManifestKey(4, NamingV2), file); err != nil {
		t.Fatal(err)
	}
	if _, err := Commit(ctx, b, v3, &Transaction{Op: OpAppend, Fragments: []Fragment{frag}}); !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("append over a concurrent overwrite = %v, want ErrConflict", err)
	}
	if _, err := Commit(ctx, b, nil, &Transaction{Op: OpOverwrite, Schema: ls}); !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("second create = %v, want ErrConflict", err)
	}
}

// TestCommitPublishesInOrder: a commit prepares its files together but
// publishes them in the order readers need (the transaction file before
// the manifest that names it, the hint after the manifest), and leaves no
// temporary file behind, after a rebase or a conflict either.
func TestCommitPublishesInOrder(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openDir(t, dir)
	ls, _ := lancefile.FromArrow(lancetest.AllTypesSchema())
	var (
		uuid    string // the transaction being committed
		checked int
	)
	b.SetFault(func(ctx context.Context, op, key string, do func() error) error {
		if op != "put-if-absent" || !strings.HasPrefix(key, versionsDir) {
			return do()
		}
		v, _, ok := parseManifestName(strings.TrimPrefix(key, versionsDir))
		if !ok {
			t.Errorf("manifest key %q", key)
			return do()
		}
		if names, err := filepath.Glob(filepath.Join(dir, txnDir, "*-"+uuid+".txn")); err != nil || len(names) != 1 {
			t.Errorf("manifest of version %d published before its transaction file %s (%v)", v, uuid, err)
		}
		_, absent := os.Stat(filepath.Join(dir, key)) // nil: a lost race, the winner's hint
		if hint, err := b.Get(ctx, hintKey); err == nil && absent != nil && string(hint) == string(hintOf(v)) {
			t.Errorf("hint names version %d before its manifest is published", v)
		}
		checked++
		return do()
	})
	commit := func(base *Dataset, txn *Transaction) (*Dataset, error) {
		uuid = fmt.Sprintf("txn-%d", checked)
		txn.UUID = uuid
		return Commit(ctx, b, base, txn)
	}
	v1, err := commit(nil, &Transaction{Op: OpOverwrite, Schema: ls})
	if err != nil {
		t.Fatal(err)
	}
	frag := Fragment{PhysicalRows: 0}
	if _, err := commit(v1, &Transaction{Op: OpAppend, Fragments: []Fragment{frag}}); err != nil {
		t.Fatal(err)
	}
	v3, err := commit(v1, &Transaction{Op: OpAppend, Fragments: []Fragment{frag}}) // rebases
	if err != nil || v3.Version() != 3 {
		t.Fatalf("stale append: version %v, %v", v3, err)
	}
	if _, err := commit(nil, &Transaction{Op: OpOverwrite, Schema: ls}); !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("second create = %v, want ErrConflict", err)
	}
	if hint, err := b.Get(ctx, hintKey); err != nil || string(hint) != string(hintOf(3)) {
		t.Fatalf("hint %q, %v; want version 3", hint, err)
	}
	if checked != 5 { // the stale append's two attempts included
		t.Fatalf("%d manifest publications seen, want 5", checked)
	}
	wantNoTemporaries(t, dir)
}

// wantNoTemporaries fails t if a temporary file is left under dir.
func wantNoTemporaries(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".quiver-tmp-") {
			t.Errorf("temporary file left: %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCommitPrepareFails: a commit whose manifest cannot be written
// publishes nothing, not even its transaction file, leaves nothing
// temporary and is ErrUnavailable (trying again may succeed).
func TestCommitPrepareFails(t *testing.T) {
	dir := t.TempDir()
	b := openDir(t, dir)
	ls, _ := lancefile.FromArrow(lancetest.AllTypesSchema())
	if err := os.WriteFile(filepath.Join(dir, "_versions"), nil, 0o600); err != nil { // not a folder
		t.Fatal(err)
	}
	_, err := Commit(context.Background(), b, nil, &Transaction{Op: OpOverwrite, Schema: ls})
	if !errors.Is(err, writers.ErrUnavailable) {
		t.Fatalf("commit without a _versions folder: %v, want ErrUnavailable", err)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, txnDir, "*.txn")); len(names) != 0 {
		t.Fatalf("transaction files published by a failed commit: %v", names)
	}
	wantNoTemporaries(t, dir)
}

// TestCommitRebaseAsksConcurrent: a stale append asks its Concurrent rule
// about the version it would rebase over; a refusal ends the commit and
// publishes nothing.
func TestCommitRebaseAsksConcurrent(t *testing.T) {
	ctx := context.Background()
	b := openDir(t, t.TempDir())
	ls, _ := lancefile.FromArrow(lancetest.AllTypesSchema())
	v1, err := Commit(ctx, b, nil, &Transaction{Op: OpOverwrite, Schema: ls})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Commit(ctx, b, v1, &Transaction{Op: OpAppend, Properties: map[string]string{"k": "theirs"}}); err != nil {
		t.Fatal(err)
	}
	var asked []string
	refuse := func(other *Transaction) error {
		asked = append(asked, other.Properties["k"])
		return writers.Errorf(writers.ErrConflict, "same key")
	}
	if _, err := Commit(ctx, b, v1, &Transaction{Op: OpAppend, Concurrent: refuse}); !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("stale append refused by its rule = %v, want ErrConflict", err)
	}
	if len(asked) != 1 || asked[0] != "theirs" {
		t.Fatalf("the rule was asked about %q, want the concurrent version's transaction", asked)
	}
	if latest, err := Latest(ctx, b); err != nil || latest.Version() != 2 {
		t.Fatalf("latest version %v (%v), want 2: nothing published", latest, err)
	}
}

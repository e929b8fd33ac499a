package lance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// Hostile descriptors: a descriptor is client input (the commit action
// hands them over). Each case edits a genuine precommit's descriptor; every
// one must be refused with ErrInvalid naming the endpoint and the
// descriptor, publish nothing and leave the dataset readable with the rows
// it had.

// descEdit turns a genuine descriptor into a hostile one.
type descEdit struct {
	name string
	edit func(d *descriptor)
}

// escapingNames are fragment data file names that are not a plain name
// under data/.
var escapingNames = []string{"../x.lance", "/etc/passwd", "a/b.lance", "..", ".", "", "../_versions/1.manifest", "x\x01.lance"}

// fragmentEdits are hostile edits of a descriptor's first fragment.
func fragmentEdits() []descEdit {
	edits := []descEdit{
		{"fragment naming a missing file", func(d *descriptor) { d.Fragments[0].Path = "00000000-0000-0000-0000-000000000000.lance" }},
		{"fragment of a wrong size", func(d *descriptor) { d.Fragments[0].Size++ }},
	}
	for _, n := range escapingNames {
		edits = append(edits, descEdit{fmt.Sprintf("fragment path %q", n), func(d *descriptor) { d.Fragments[0].Path = n }})
	}
	return edits
}

// deletionEdits are hostile edits of a merge descriptor: without its
// merge, or with its first updated fragment's deletion file changed.
var deletionEdits = []descEdit{
	{"fragments without the merge", func(d *descriptor) { d.Merge = nil }},
	{"new deletion file of a wrong size", func(d *descriptor) { d.Merge.Updated[0].NewDeletionSize++ }},
	{"new deletion file size missing", func(d *descriptor) { d.Merge.Updated[0].NewDeletionSize = 0 }},
	{"new deletion file missing", func(d *descriptor) { d.Merge.Updated[0].NewDeletion.ID++ }},
}

// reencode returns the descriptor d with edit applied.
func reencode(t *testing.T, d writers.Descriptor, edit func(*descriptor)) writers.Descriptor {
	t.Helper()
	desc := mustDecode(t, d)
	edit(desc)
	b, err := desc.encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustDecode(t *testing.T, d writers.Descriptor) *descriptor {
	t.Helper()
	desc, err := decodeDescriptor(d)
	if err != nil {
		t.Fatal(err)
	}
	return desc
}

// wantRefused commits h under key and checks it is refused and changed
// nothing: same version, same rows, read back whole.
func wantRefused(t *testing.T, w *Writer, mem memory.Allocator, key writers.TxnKey, h writers.Descriptor) {
	t.Helper()
	ctx := context.Background()
	before, err := w.latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows := diffState(t, w, mem)
	_, err = w.Commit(ctx, key, []writers.Descriptor{h})
	if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "descriptor 0") {
		t.Fatalf("Commit of %s: %v, want ErrInvalid naming descriptor 0", h, err)
	}
	after, err := w.latest(ctx)
	if err != nil || after.Version() != before.Version() {
		t.Fatalf("the refused commit made version %d (was %d): %v", after.Version(), before.Version(), err)
	}
	if got := diffState(t, w, mem); !maps.Equal(got, rows) {
		t.Fatalf("rows after the refused commit: %v, want %v", got, rows)
	}
}

func TestHostileAppendDescriptors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	seedDiff(t, dir, mem)
	w := newWriter(t, dir, mem)
	defer w.Close(context.Background())
	key := writers.TxnKey{Writer: "job", Epoch: 1}
	rec := diffRecord(mem, []diffRow{{id: 20, k2: "a", name: "s20"}})
	defer rec.Release()
	if err := w.Write(context.Background(), key, rec); err != nil {
		t.Fatal(err)
	}
	d, err := w.Precommit(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	// A merge that drops a fragment another commit wrote, exactly as the
	// manifest holds it.
	latest, err := w.latest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f := latest.Manifest.Fragments[0]
	drop := touchedFragment{ID: f.ID, Files: []string{f.Files[0].Path}, Deletion: f.Deletion}
	edits := append(fragmentEdits(), descEdit{"merge dropping another commit's fragment", func(d *descriptor) {
		d.Merge = &mergeDesc{ReadVersion: latest.Version(), Removed: []touchedFragment{drop}}
	}})
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			h := reencode(t, d, e.edit)
			// Handed over, it is refused before any commit is decided too.
			if err := w.CheckDescriptors(context.Background(), key, []writers.Descriptor{h}); !errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("CheckDescriptors: %v, want ErrInvalid", err)
			}
			wantRefused(t, w, mem, key, h)
		})
	}
	if err := w.CheckDescriptors(context.Background(), key, []writers.Descriptor{d}); err != nil {
		t.Fatalf("CheckDescriptors of the genuine descriptor: %v", err)
	}
	if _, err := w.Commit(context.Background(), key, []writers.Descriptor{d}); err != nil {
		t.Fatalf("Commit of the genuine descriptor: %v", err)
	}
	if n := published(t, w); n != 11 {
		t.Fatalf("%d rows after the genuine commit, want 11", n)
	}
}

func TestHostileMergeDescriptors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	dir := t.TempDir()
	seedDiff(t, dir, mem)
	w := mergeWriter(t, dir, mem, []string{"id", "k2"}, [3]string{"update_all", "insert_all", "keep"})
	defer w.Close(ctx)
	key := writers.TxnKey{Writer: "job", Epoch: 1}
	rec := diffRecord(mem, []diffRow{{id: 1, k2: "a", name: "s1"}, {id: 20, k2: "a", name: "s20"}})
	defer rec.Release()
	if err := w.Write(ctx, key, rec); err != nil {
		t.Fatal(err)
	}
	d, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if m := mustDecode(t, d).Merge; len(m.Updated) != 1 {
		t.Fatalf("the genuine merge updates %d fragments, want 1", len(m.Updated))
	}
	for _, e := range append(fragmentEdits(), deletionEdits...) {
		t.Run(e.name, func(t *testing.T) { wantRefused(t, w, mem, key, reencode(t, d, e.edit)) })
	}
	t.Run("new deletion file removed", func(t *testing.T) {
		u := mustDecode(t, d).Merge.Updated[0]
		path := filepath.Join(dir, filepath.FromSlash(u.NewDeletion.Path(u.ID)))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		wantRefused(t, w, mem, key, d)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := w.Commit(ctx, key, []writers.Descriptor{d}); err != nil {
		t.Fatalf("Commit of the genuine descriptor: %v", err)
	}
	want := names(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)("r")
	want[1], want[20] = "s1", "s20"
	if got := diffState(t, w, mem); !maps.Equal(got, want) {
		t.Fatalf("rows after the genuine commit: %v, want %v", got, want)
	}
}

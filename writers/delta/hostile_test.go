package delta

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// Hostile descriptors: a descriptor is client input (the commit action
// hands them over). Each case below edits a genuine precommit's
// descriptor; every one must be refused with ErrInvalid naming the
// endpoint and the descriptor, publish nothing, and leave the table's rows
// as they were (read back through the sink's own reader).

// target is what a hostile edit aims at: a live file another commit
// wrote, and the table's version.
type target struct {
	other   string
	version int64
}

// descEdit turns a genuine descriptor into a hostile one.
type descEdit struct {
	name string
	edit func(d *descriptor, tg target)
}

// escapingPaths are add paths outside the table root or its data.
var escapingPaths = []string{
	"../x.parquet", "/etc/passwd", "s3://other/x.parquet", "file:///etc/passwd", "%2E%2E/x.parquet",
	"a//x.parquet", "./x.parquet", "a/../../x.parquet", "_delta_log/00000000000000000009.json", "",
}

// appendEdits are hostile edits of an append's descriptor.
func appendEdits() []descEdit {
	edits := []descEdit{
		{"upsert plan removing another commit's file", func(d *descriptor, tg target) {
			d.Upsert = &upsertPlan{ReadVersion: tg.version, ReadFiles: []string{tg.other}, Removes: []string{tg.other}}
		}},
		{"add of a missing file", func(d *descriptor, _ target) { d.Adds[0].Path = "part-00000-missing-c000.zstd.parquet" }},
		{"add of a wrong size", func(d *descriptor, _ target) { d.Adds[0].Size++ }},
		{"add re-adding another commit's file with another size", func(d *descriptor, tg target) {
			d.Adds[0].Path = tg.other
			d.Adds[0].Size = 1
		}},
	}
	for _, p := range escapingPaths {
		edits = append(edits, descEdit{"add path " + p, func(d *descriptor, _ target) { d.Adds[0].Path = p }})
	}
	return edits
}

// reencode returns the descriptor d with edit applied.
func reencode(t *testing.T, d writers.Descriptor, tg target, edit func(*descriptor, target)) writers.Descriptor {
	t.Helper()
	desc := mustDecode(t, d)
	edit(desc, tg)
	b, err := desc.encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantRefused commits the hostile descriptor h under key and checks that
// it is refused and changed nothing.
func wantRefused(t *testing.T, w *Writer, cfg *Config, key writers.TxnKey, h writers.Descriptor, cols []string) {
	t.Helper()
	rows, version := tableRows(t, cfg, cols), snapshot(t, cfg).Version
	_, err := w.Commit(context.Background(), key, []writers.Descriptor{h})
	if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "descriptor 0") {
		t.Fatalf("Commit of %s: %v, want ErrInvalid naming descriptor 0", h, err)
	}
	if v := snapshot(t, cfg).Version; v != version {
		t.Fatalf("the refused commit made version %d (was %d)", v, version)
	}
	sameRows(t, "after the refused commit", tableRows(t, cfg, cols), rows)
}

// newFiles returns the paths of the table's live files not in before.
func newFiles(t *testing.T, cfg *Config, before []string) []string {
	t.Helper()
	var out []string
	for _, a := range snapshot(t, cfg).Files() {
		if !slices.Contains(before, a.Path) {
			out = append(out, a.Path)
		}
	}
	return out
}

func TestHostileAppendDescriptors(t *testing.T) {
	c := newTC(t, memURI(t))
	cols := []string{"id", "name"}
	c.put(writers.AutoKey("first"), c.ids(0, 10))
	first := newFiles(t, c.cfg, nil)
	c.put(writers.TxnKey{Writer: "other", Epoch: 1}, c.ids(10, 10)) // version 2
	tg := target{newFiles(t, c.cfg, first)[0], snapshot(t, c.cfg).Version}
	key := writers.TxnKey{Writer: "job", Epoch: 1}
	rec := c.ids(100, 5)
	d := precommitOne(t, c.w, key, rec)
	rec.Release()
	for _, e := range appendEdits() {
		t.Run(e.name, func(t *testing.T) {
			h := reencode(t, d, tg, e.edit)
			// Handed over, it is refused before any commit is decided too.
			if err := c.w.CheckDescriptors(c.ctx, key, []writers.Descriptor{h}); !errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("CheckDescriptors: %v, want ErrInvalid", err)
			}
			wantRefused(t, c.w, c.cfg, key, h, cols)
		})
	}
	if _, err := c.w.Commit(c.ctx, key, []writers.Descriptor{d}); err != nil {
		t.Fatalf("Commit of the genuine descriptor: %v", err)
	}
	if n := publishedRows(t, c.cfg); n != 25 {
		t.Fatalf("%d rows after the genuine commit, want 25", n)
	}
}

// upsertEdits are hostile edits of an upsert's descriptor that marked a
// row of the first seed file; tg.other is the second seed file, which the
// plan did not read.
func upsertEdits() []descEdit {
	return []descEdit{
		{"removes a file it did not read", func(d *descriptor, tg target) {
			d.Upsert.Removes = []string{tg.other}
		}},
		{"marks a file it did not read", func(d *descriptor, tg target) {
			d.Upsert.Updates[0].Path = tg.other
		}},
		{"claims a read before the file existed", func(d *descriptor, tg target) {
			d.Upsert.ReadVersion = 0
			d.Upsert.ReadFiles = append(d.Upsert.ReadFiles, tg.other)
			d.Upsert.Removes = []string{tg.other}
		}},
		{"misstates a read deletion vector", func(d *descriptor, _ target) {
			d.Upsert.ReadDVs = map[string]string{d.Upsert.ReadFiles[0]: "u0000000000000000000000@1"}
		}},
		{"removes and marks one file", func(d *descriptor, _ target) {
			d.Upsert.Removes = []string{d.Upsert.Updates[0].Path}
		}},
		{"deletion-vector file of a wrong size", func(d *descriptor, _ target) { d.Upsert.DVFileSize++ }},
		{"deletion-vector file size missing", func(d *descriptor, _ target) { d.Upsert.DVFileSize = 0 }},
		{"deletion vector past its file", func(d *descriptor, _ target) {
			off := int32(d.Upsert.DVFileSize)
			d.Upsert.Updates[0].DeletionVector.Offset = &off
		}},
		{"add of a missing file", func(d *descriptor, _ target) { d.Adds[0].Path = "part-00000-missing-c000.zstd.parquet" }},
		{"add of a wrong size", func(d *descriptor, _ target) { d.Adds[0].Size-- }},
		{"adds without the plan", func(d *descriptor, _ target) { d.Upsert = nil }},
		{"remove path escaping", func(d *descriptor, _ target) {
			d.Upsert.ReadFiles = append(d.Upsert.ReadFiles, "../x.parquet")
			d.Upsert.Removes = []string{"../x.parquet"}
		}},
	}
}

func TestHostileUpsertDescriptors(t *testing.T) {
	mem := checkedMem(t)
	ctx := context.Background()
	cfg := upsertDVConfig(memURI(t))
	w := openWriter(t, cfg, mem)
	cols := []string{"id", "str"}
	seedIDs(t, w, mem, [2]int32{0, 50})
	first := newFiles(t, cfg, nil)
	seedIDs(t, w, mem, [2]int32{50, 100})
	tg := target{newFiles(t, cfg, first)[0], snapshot(t, cfg).Version}
	key := writers.TxnKey{Writer: "job", Epoch: 1}
	cs := []idChange{{3, "three", "U"}, {4, "", "D"}} // keys of the first file only
	rec := idBatch(mem, cs...)
	defer rec.Release()
	want := applyIDs(tableRows(t, cfg, cols), cs)
	d := precommitOne(t, w, key, rec)
	if plan := mustDecode(t, d).Upsert; !slices.Equal(plan.ReadFiles, first) || len(plan.Updates) != 1 || len(plan.Removes) != 0 {
		t.Fatalf("the genuine plan %+v does not read and mark only %s", plan, first)
	}
	for _, e := range upsertEdits() {
		t.Run(e.name, func(t *testing.T) {
			wantRefused(t, w, cfg, key, reencode(t, d, tg, e.edit), cols)
		})
	}
	t.Run("deletion-vector file missing", func(t *testing.T) {
		b := tableBucket(t, cfg)
		dv := mustDecode(t, d).Upsert.DVFile
		data, err := b.Get(ctx, dv)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(ctx, dv); err != nil {
			t.Fatal(err)
		}
		wantRefused(t, w, cfg, key, d, cols)
		if err := b.Put(ctx, dv, data); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := w.Commit(ctx, key, []writers.Descriptor{d}); err != nil {
		t.Fatalf("Commit of the genuine descriptor: %v", err)
	}
	sameRows(t, "after the genuine commit", tableRows(t, cfg, cols), want)
}

func mustDecode(t *testing.T, d writers.Descriptor) *descriptor {
	t.Helper()
	desc, err := decodeDescriptor(d)
	if err != nil {
		t.Fatal(err)
	}
	return desc
}

// CheckDescriptors tells, before a commit is decided, whether handed-over
// descriptors could be published: a descriptor whose file is gone (its
// transaction rolled back on the server that precommitted it) is refused,
// a genuine one passes, and so does a replay, which publishes nothing.
func TestCheckDescriptors(t *testing.T) {
	c := newTC(t, memURI(t))
	c.put(writers.AutoKey("first"), c.ids(0, 10))
	peer := openWriter(t, c.cfg, c.mem) // the server the descriptor is handed to
	key := writers.TxnKey{Writer: "job", Epoch: 1}
	rec := c.ids(100, 5)
	d := precommitOne(t, c.w, key, rec)
	rec.Release()
	descs := []writers.Descriptor{d}
	if err := peer.CheckDescriptors(c.ctx, key, descs); err != nil {
		t.Fatalf("genuine descriptor: %v", err)
	}
	added, err := deltalog.DecodePath(mustDecode(t, d).Adds[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := tableBucket(t, c.cfg).Delete(c.ctx, added); err != nil {
		t.Fatal(err)
	}
	err = peer.CheckDescriptors(c.ctx, key, descs)
	if !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("descriptor of a deleted file: %v, want ErrInvalid", err)
	}
	if v := snapshot(t, c.cfg).Version; v != 0 {
		t.Fatalf("CheckDescriptors moved the table to version %d", v)
	}
}

package deltalog

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/quiver-ingest/quiver/internal/alloccheck"
	"github.com/quiver-ingest/quiver/internal/deltagolden"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// logOnly copies the _delta_log of golden table name (sidecars included)
// into a fresh mem:// table, leaving out the keys drop says to.
func logOnly(t *testing.T, name string, drop func(key string) bool) Store {
	t.Helper()
	ctx := t.Context()
	src := deltagolden.Open(t, name)
	dst, err := storage.Open(ctx, memURI(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dst.Close() })
	for obj, err := range src.List(ctx, LogDir, "") {
		if err != nil {
			t.Fatal(err)
		}
		if drop(obj.Key) {
			continue
		}
		data, err := src.Get(ctx, obj.Key)
		if err != nil {
			t.Fatal(err)
		}
		if err := dst.Put(ctx, obj.Key, data); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestV2CheckpointRead: the V2 checkpoints Spark wrote (JSON and Parquet
// top-level files, each with a Parquet sidecar) are the only source of
// the table's state once the commits before them are gone; a missing
// sidecar fails the load instead of losing files.
func TestV2CheckpointRead(t *testing.T) {
	for _, name := range []string{"checkpoint-v2-json", "checkpoint-v2-parquet"} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			cleaned := logOnly(t, name, func(key string) bool {
				return key == CommitKey(0) || key == CommitKey(1)
			})
			s, err := Load(ctx, cleaned)
			if err != nil {
				t.Fatal(err)
			}
			if rows, _ := s.NumRecords(); s.Version != 2 || s.NumFiles() != 2 || rows != 10 {
				t.Fatalf("version %d, %d files, %d rows; want 2, 2, 10", s.Version, s.NumFiles(), rows)
			}
			if err := CheckWritable(s); err != nil {
				t.Fatal(err)
			}
			noSidecar := logOnly(t, name, func(key string) bool {
				return key == CommitKey(0) || key == CommitKey(1) || strings.HasPrefix(key, SidecarDir)
			})
			if _, err := Load(ctx, noSidecar); err == nil {
				t.Fatal("load without the sidecar succeeded")
			}
		})
	}
}

// TestV2CheckpointHostile: sidecar paths outside _delta_log/_sidecars,
// sidecars holding other actions and corrupt files are refused with
// ErrCorrupt naming the file; nothing outside the log is read.
func TestV2CheckpointHostile(t *testing.T) {
	ctx := t.Context()
	store := copyTable(t, nil, -1)
	s := create(t, store, nil)
	root := store.(interface{ URI() string }).URI()
	for _, p := range []string{"../../secret.parquet", "..%2F..%2Fsecret.parquet", "/etc/passwd", "s3://bucket/x.parquet", "", "a/b.parquet", `..\x.parquet`,
		root + "/x.parquet", root + "/_delta_log/_sidecars/../x.parquet", root + "/_delta_log/_sidecars/a/x.parquet", root + "x/_delta_log/_sidecars/x.parquet", "file:///table/_delta_log/_sidecars/x.parquet"} {
		if _, err := SidecarKey(store, p); !errors.Is(err, ErrCorrupt) {
			t.Errorf("SidecarKey(%q) = %v, want ErrCorrupt", p, err)
		}
	}
	if k, err := SidecarKey(store, "00000000000000000002.checkpoint.0000000001.0000000001.x%20y.parquet"); err != nil || k != SidecarDir+"00000000000000000002.checkpoint.0000000001.0000000001.x y.parquet" {
		t.Errorf("SidecarKey of a file name = %q, %v", k, err)
	}
	top := LogDir + "00000000000000000000.checkpoint.00000000-0000-0000-0000-000000000001.json"
	cases := map[string]struct{ checkpoint, sidecar string }{
		"escaping path":  {`{"checkpointMetadata":{"version":0}}` + "\n" + `{"sidecar":{"path":"../00000000000000000000.json","sizeInBytes":1,"modificationTime":1}}`, ""},
		"missing":        {`{"checkpointMetadata":{"version":0}}` + "\n" + `{"sidecar":{"path":"gone.parquet","sizeInBytes":1,"modificationTime":1}}`, ""},
		"corrupt":        {`{"checkpointMetadata":{"version":0}}` + "\n" + `{"sidecar":{"path":"bad.parquet","sizeInBytes":1,"modificationTime":1}}`, "PAR1garbagePAR1"},
		"corrupt json":   {`{"checkpointMetadata":{"version":0}}` + "\n" + `{"add":[1,2]}`, ""},
		"too many names": {strings.Repeat(`{"sidecar":{"path":"x.parquet","sizeInBytes":1,"modificationTime":1}}`+"\n", maxSidecars+1), ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			tbl := copyTable(t, store, 0)
			if err := tbl.Put(ctx, top, []byte(c.checkpoint)); err != nil {
				t.Fatal(err)
			}
			if c.sidecar != "" {
				if err := tbl.Put(ctx, SidecarDir+"bad.parquet", []byte(c.sidecar)); err != nil {
					t.Fatal(err)
				}
			}
			l, err := listLog(ctx, tbl, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(l.checkpoints[0]) != 1 {
				t.Fatalf("the V2 checkpoint is not listed: %v", l.checkpoints)
			}
			_, err = readCheckpoint(ctx, tbl, 0, l.checkpoints[0][0].keys())
			if err == nil || (!errors.Is(err, ErrCorrupt) && !errors.Is(err, storage.ErrNotExist)) {
				t.Fatalf("readCheckpoint = %v, want ErrCorrupt or not found", err)
			}
			// Replay falls back to the commits, which are complete here.
			if got, err := Load(ctx, tbl); err != nil || got.Version != s.Version {
				t.Fatalf("Load = %v, %v", got, err)
			}
		})
	}
}

// TestV2CheckpointWrite: a table whose checkpoint policy is v2 gets
// UUID-named JSON V2 checkpoints (checkpointMetadata first, tombstones
// without stats or tags) that a load reads back alone, domains and row
// ids included.
func TestV2CheckpointWrite(t *testing.T) {
	stores(t, func(t *testing.T, store Store) {
		ctx := t.Context()
		rowTracked(t, store, map[string]string{"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "3"})
		for i := range 2 {
			s, err := Load(ctx, store)
			if err != nil {
				t.Fatal(err)
			}
			actions := []Action{addAction(fmt.Sprint("f", i), "d")}
			if i == 0 {
				now := time.Now().UnixMilli()
				actions = append(actions, Action{Remove: &Remove{Path: "gone.parquet", DeletionTimestamp: &now, DataChange: true,
					Stats: `{"numRecords":7}`, Tags: map[string]string{"k": "v"}}})
			}
			if _, err := Commit(ctx, store, s, actions, CommitOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		l, err := listLog(ctx, store, "")
		if err != nil {
			t.Fatal(err)
		}
		sets := l.checkpoints[3]
		if len(sets) != 1 || !v2CheckpointRe.MatchString(strings.TrimPrefix(sets[0].keys()[0], LogDir)) {
			t.Fatalf("checkpoints at version 3: %v, want one UUID-named", sets)
		}
		data, err := store.Get(ctx, sets[0].keys()[0])
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(data), `{"checkpointMetadata":{"version":3}}`) {
			t.Fatalf("checkpoint starts %.80s, want checkpointMetadata", data)
		}
		for line := range strings.Lines(string(data)) {
			if strings.HasPrefix(line, `{"remove":`) && (strings.Contains(line, `"stats"`) || strings.Contains(line, `"tags"`)) {
				t.Fatalf("checkpoint tombstone with stats or tags: %s", line)
			}
		}
		if !strings.Contains(string(data), `"path":"gone.parquet"`) {
			t.Fatal("the checkpoint lost the tombstone")
		}
		// Only the checkpoint: the commits before it removed.
		for v := range int64(3) {
			if err := store.(*storage.Bucket).Delete(ctx, CommitKey(v)); err != nil {
				t.Fatal(err)
			}
		}
		s, err := Load(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		hwm, err := s.RowIDHighWaterMark()
		if s.Version != 3 || s.NumFiles() != 2 || err != nil || hwm != 19 {
			t.Fatalf("from the V2 checkpoint: version %d, %d files, high-water mark %d (%v)", s.Version, s.NumFiles(), hwm, err)
		}
		for _, a := range s.Files() {
			if a.BaseRowID == nil {
				t.Fatalf("add %s lost its baseRowId", a.Path)
			}
		}
	})
}

// TestLogCleanupKeepsSidecars: log cleanup deletes the sidecars no
// retained checkpoint names (orphans, and those of checkpoints it
// deletes) and keeps the ones the newest expired checkpoint needs.
func TestLogCleanupKeepsSidecars(t *testing.T) {
	ctx := t.Context()
	store := logOnly(t, "checkpoint-v2-json", func(string) bool { return false })
	orphan := SidecarDir + "orphan.parquet"
	if err := store.Put(ctx, orphan, []byte("x")); err != nil {
		t.Fatal(err)
	}
	var sidecar string
	for obj, err := range store.List(ctx, SidecarDir, "") {
		if err != nil {
			t.Fatal(err)
		}
		if obj.Key != orphan {
			sidecar = obj.Key
		}
	}
	later := time.Now().Add(2 * time.Hour)
	expired := func() map[string]bool {
		t.Helper()
		objs, err := ExpiredLogFiles(ctx, store, later, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, o := range objs {
			out[o.Key] = true
		}
		return out
	}
	got := expired()
	if !got[orphan] || got[sidecar] || !got[CommitKey(0)] || !got[CommitKey(1)] || got[CommitKey(2)] {
		t.Fatalf("expired %v: want the orphan and commits 0, 1, not %s nor commit 2", got, sidecar)
	}
	// Quiver's own V2 checkpoint at version 4 (interval 2) takes over.
	for range 2 {
		s, err := Load(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		a := Action{Txn: &Txn{AppID: "x", Version: s.Version}}
		if _, err := Commit(ctx, store, s, []Action{a}, CommitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got = expired()
	if !got[sidecar] || !got[orphan] || !got[CommitKey(3)] {
		t.Fatalf("expired %v: want %s, the orphan and commit 3 once version 4 is checkpointed", got, sidecar)
	}
	if s, err := Load(ctx, store); err != nil || s.Version != 4 {
		t.Fatalf("Load = %v, %v", s, err)
	}
}

// rewriteSidecarPath makes the version-2 checkpoint of the golden table in
// store name its sidecar by path(name) instead of its bare file name, and
// returns the sidecar's key.
func rewriteSidecarPath(t *testing.T, store Store, path func(name string) string) string {
	t.Helper()
	ctx := t.Context()
	var sidecar string
	for obj, err := range store.List(ctx, SidecarDir, "") {
		if err != nil {
			t.Fatal(err)
		}
		sidecar = obj.Key
	}
	l, err := listLog(ctx, store, "")
	if err != nil {
		t.Fatal(err)
	}
	top := l.checkpoints[2][0].keys()[0]
	data, err := store.Get(ctx, top)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(sidecar, SidecarDir)
	data = []byte(strings.Replace(string(data), `"path":"`+name+`"`, `"path":"`+path(name)+`"`, 1))
	if !strings.Contains(string(data), path(name)) {
		t.Fatalf("%s does not name %s", top, name)
	}
	if err := store.Put(ctx, top, data); err != nil {
		t.Fatal(err)
	}
	return sidecar
}

// TestV2CheckpointAbsoluteSidecar: a sidecar named by an absolute URI
// into the table's own _sidecars (the protocol allows it) is read by a
// load and kept by log cleanup; one named by a path that does not resolve
// into the table fails the cleanup instead of letting it delete the
// sidecar a retained checkpoint may need, and the commits below it.
func TestV2CheckpointAbsoluteSidecar(t *testing.T) {
	ctx := t.Context()
	later := time.Now().Add(2 * time.Hour)

	store := logOnly(t, "checkpoint-v2-json", func(key string) bool { return key == CommitKey(0) || key == CommitKey(1) })
	root := store.(interface{ URI() string }).URI()
	sidecar := rewriteSidecarPath(t, store, func(name string) string { return root + "/" + SidecarDir + name })
	if s, err := Load(ctx, store); err != nil || s.NumFiles() != 2 {
		t.Fatalf("Load with an absolute sidecar path = %v, %v", s, err)
	}
	objs, err := ExpiredLogFiles(ctx, store, later, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.Key == sidecar {
			t.Fatalf("cleanup deletes %s, which the retained checkpoint names by its absolute path", sidecar)
		}
	}

	foreign := logOnly(t, "checkpoint-v2-json", func(string) bool { return false })
	sidecar = rewriteSidecarPath(t, foreign, func(name string) string { return "file:///table/_delta_log/_sidecars/" + name })
	objs, _ = ExpiredLogFiles(ctx, foreign, later, time.Hour)
	for _, o := range objs {
		if o.Key == sidecar || strings.HasSuffix(o.Key, ".json") {
			t.Errorf("cleanup deletes %s, which a checkpoint naming an unresolvable sidecar path may need", o.Key)
		}
	}
	var all []storage.Object
	for obj, err := range foreign.List(ctx, LogDir, "") {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, obj)
	}
	if _, err := keptSidecars(ctx, foreign, all, 2); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("keptSidecars with an unresolvable sidecar path = %v, want ErrCorrupt", err)
	}
}

// TestV2CheckpointDuplicateSidecar: a checkpoint naming one sidecar many
// times is refused (each name would read it, and hold its actions, again).
func TestV2CheckpointDuplicateSidecar(t *testing.T) {
	ctx := t.Context()
	store := logOnly(t, "checkpoint-v2-json", func(string) bool { return false })
	var name string
	rewriteSidecarPath(t, store, func(n string) string {
		name = n
		return n + `","sizeInBytes":1,"modificationTime":1}}` + "\n" + `{"sidecar":{"path":"` + n
	})
	l, err := listLog(ctx, store, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readCheckpoint(ctx, store, 2, l.checkpoints[2][0].keys()); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("readCheckpoint of a checkpoint naming %s twice = %v, want ErrCorrupt", name, err)
	}
}

// TestCheckpointWithoutState: a checkpoint that parses but holds no whole
// state (a UUID-named file without checkpointMetadata, or with one of
// another version, or truncated to its first line, or empty; a classic
// checkpoint without rows) is neither replayed, so Load falls back to the
// commits, nor the floor of log cleanup, which keeps the commits below it.
func TestCheckpointWithoutState(t *testing.T) {
	ctx := t.Context()
	store := copyTable(t, nil, -1)
	s := create(t, store, nil)
	for i := range 2 {
		if _, err := Commit(ctx, store, s, []Action{addAction(fmt.Sprint("f", i), "d")}, CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		var err error
		if s, err = Load(ctx, store); err != nil {
			t.Fatal(err)
		}
	}
	v2 := LogDir + "00000000000000000002.checkpoint.00000000-0000-0000-0000-000000000001.json"
	state := `{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}` + "\n" + `{"metaData":{"id":"x","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[]}","partitionColumns":[],"configuration":{}}}` + "\n"
	emptyParquet := func() []byte {
		var buf bytes.Buffer
		w := parquet.NewGenericWriter[cpRow](&buf)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}()
	for name, c := range map[string]struct {
		key  string
		body []byte
	}{
		"only checkpointMetadata": {v2, []byte(`{"checkpointMetadata":{"version":2}}` + "\n")},
		"empty":                   {v2, nil},
		"no checkpointMetadata":   {v2, []byte(state)},
		"checkpointMetadata of 1": {v2, []byte(`{"checkpointMetadata":{"version":1}}` + "\n" + state)},
		"classic without rows":    {CheckpointKey(2), emptyParquet},
		"two checkpointMetadata":  {v2, []byte(`{"checkpointMetadata":{"version":2}}` + "\n" + `{"checkpointMetadata":{"version":2}}` + "\n" + state)},
	} {
		t.Run(name, func(t *testing.T) {
			tbl := copyTable(t, store, 2)
			if err := tbl.Put(ctx, c.key, c.body); err != nil {
				t.Fatal(err)
			}
			if got, err := Load(ctx, tbl); err != nil || got.NumFiles() != 2 {
				t.Fatalf("Load = %v, %v (commits 0 to 2 are complete)", got, err)
			}
			objs, err := ExpiredLogFiles(ctx, tbl, time.Now().Add(2*time.Hour), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				t.Errorf("cleanup deletes %s (the only state is in the commits)", o.Key)
			}
		})
	}
}

// TestLogCleanupHugePartCount: a multi-part checkpoint part whose name
// claims 9,999,999,999 parts (an incomplete set) does not size anything by
// that count, and a log file name past the largest version is ignored.
func TestLogCleanupHugePartCount(t *testing.T) {
	ctx := t.Context()
	store, err := storage.Open(ctx, memURI(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{LogDir + "00000000000000000005.checkpoint.0000000001.9999999999.parquet", SidecarDir + "x.parquet"}
	var objs []storage.Object
	for _, k := range keys {
		if err := store.Put(ctx, k, nil); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, storage.Object{Key: k})
	}
	var kept map[string]bool
	alloccheck.Below(t, "keptSidecars", func() { kept, err = keptSidecars(ctx, store, objs, 0) })
	if err != nil || len(kept) != 0 {
		t.Errorf("keptSidecars beside a multi-part checkpoint part (which names no sidecar) = %v, %v", kept, err)
	}
	if v, ok := logFileVersion(LogDir + "99999999999999999999.json"); ok {
		t.Errorf("log file 99999999999999999999.json read as version %d", v)
	}
	l := &logListing{commits: map[int64]string{}, checkpoints: map[int64][]*checkpointSet{}}
	l.add(LogDir+"99999999999999999999.json", map[string]*checkpointSet{})
	if len(l.commits) != 0 {
		t.Errorf("commit 99999999999999999999 listed as %v", l.commits)
	}
}

// TestCheckpointRowsBoundedByBytes: a Parquet checkpoint whose pages claim
// far more rows than its bytes could carry actions for (300,000 identical
// txn rows compress to a few KiB) is ErrCorrupt, not decoded and held.
func TestCheckpointRowsBoundedByBytes(t *testing.T) {
	ctx := t.Context()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[cpRow](&buf, parquet.Compression(&parquet.Zstd))
	app, version := "a", int64(1)
	rows := make([]cpRow, 1000)
	for i := range rows {
		rows[i] = cpRow{Txn: &cpTxn{AppID: &app, Version: &version}}
	}
	for range 300 {
		if _, err := w.Write(rows); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if rows := maxCheckpointRows(buf.Len()); rows >= 300_000 {
		t.Fatalf("the file of %d bytes may hold %d rows: the test needs a smaller one", buf.Len(), rows)
	}
	store, err := storage.Open(ctx, memURI(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := CheckpointKey(3)
	if err := store.Put(ctx, key, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if _, err := readCheckpointFile(ctx, store, key, maxLogObjectBytes); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("300,000 rows in %d bytes: %v, want ErrCorrupt", buf.Len(), err)
	}
}

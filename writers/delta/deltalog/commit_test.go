package deltalog

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/storage"
	"github.com/quiver-ingest/quiver/writers/storage/storagetest"
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "amount", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "day", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// stores runs fn against a fresh mem:// and a fresh file:// table.
func stores(t *testing.T, fn func(t *testing.T, store Store)) {
	for _, scheme := range []string{"mem", "file"} {
		t.Run(scheme, func(t *testing.T) {
			uri := memURI()
			if scheme == "file" {
				uri = "file://" + t.TempDir()
			}
			fn(t, storagetest.Open(t, uri))
		})
	}
}

var memTables atomic.Int64

// memURI names a fresh in-memory table.
func memURI() string { return fmt.Sprintf("mem://deltalog-test/t%d", memTables.Add(1)) }

func create(t *testing.T, store Store, conf map[string]string) *Snapshot {
	t.Helper()
	s, err := Create(t.Context(), store, testSchema, []string{"day"}, conf)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func addAction(name, day string) Action {
	pv := map[string]*string{"day": &day}
	key := "day=" + day + "/" + name + ".parquet" // day needs no escaping
	stats := `{"numRecords":10,"minValues":{"id":0},"maxValues":{"id":9},"nullCount":{"id":0}}`
	return Action{Add: &Add{Path: EncodePath(key), PartitionValues: pv, Size: 100, ModificationTime: 1, DataChange: true, Stats: stats}}
}

func txnAction(app string, v int64) Action {
	return Action{Txn: &Txn{AppID: app, Version: v}}
}

func TestCreateAppendOverwrite(t *testing.T) {
	stores(t, func(t *testing.T, store Store) {
		ctx := t.Context()
		s0 := create(t, store, nil)
		if s0.Version != 0 || !reflect.DeepEqual(s0.Protocol, Protocol{MinReaderVersion: 1, MinWriterVersion: 2}) {
			t.Fatalf("created %+v", s0)
		}
		v, err := Commit(ctx, store, s0, []Action{txnAction("w1", 7), addAction("a", "2024-01-01")}, CommitOptions{})
		if err != nil || v != 1 {
			t.Fatalf("append = %d, %v", v, err)
		}
		s1, err := Load(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := s1.TxnVersion("w1"); !ok || got != 7 || s1.NumFiles() != 1 {
			t.Fatalf("after append: txn %d %v, %d files", got, ok, s1.NumFiles())
		}
		raw, err := store.Get(ctx, CommitKey(1))
		if err != nil {
			t.Fatal(err)
		}
		actions, err := DecodeCommit(raw)
		if err != nil {
			t.Fatal(err)
		}
		ci := actions[0].CommitInfo
		if ci == nil || ci.Operation != "WRITE" || ci.IsBlindAppend == nil || !*ci.IsBlindAppend ||
			ci.ReadVersion == nil || *ci.ReadVersion != 0 || ci.EngineInfo != "quiver" || ci.TxnID == "" ||
			ci.OperationParameters["mode"] != "Append" || ci.OperationParameters["partitionBy"] != `["day"]` {
			t.Fatalf("commitInfo %+v (first action must be commitInfo)", actions[0])
		}

		// Overwrite: remove every file, add one; not a blind append.
		acts := []Action{addAction("b", "2024-01-02")}
		for _, a := range s1.Files() {
			acts = append(acts, Action{Remove: a.Remove(5, true)})
		}
		v, err = Commit(ctx, store, s1, acts, CommitOptions{ReadWholeTable: true})
		if err != nil || v != 2 {
			t.Fatalf("overwrite = %d, %v", v, err)
		}
		s2, err := s1.Update(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		ci, _ = s2.CommitInfo()
		if s2.NumFiles() != 1 || len(s2.Tombstones()) != 1 || *ci.IsBlindAppend || ci.OperationParameters["mode"] != "Overwrite" {
			t.Fatalf("after overwrite: %d files, %d tombstones, commitInfo %+v", s2.NumFiles(), len(s2.Tombstones()), ci)
		}

		if _, err := Create(ctx, store, testSchema, nil, nil); !isConflict(err, ConflictTableExists) {
			t.Fatalf("second Create = %v, want ConflictTableExists", err)
		}
	})
}

// A table's first commit can carry its rows: planned against
// NewTableSnapshot, it writes protocol, metaData (or the one it brings),
// txn and adds as version 0, and a second such commit loses the race.
func TestFirstCommitCreatesTable(t *testing.T) {
	stores(t, func(t *testing.T, store Store) {
		ctx := t.Context()
		planned, err := NewTableSnapshot(testSchema, []string{"day"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if planned.Version != -1 || planned.NumFiles() != 0 {
			t.Fatalf("planned snapshot: version %d, %d files", planned.Version, planned.NumFiles())
		}
		if _, err := Load(ctx, store); !errors.Is(err, ErrTableNotFound) {
			t.Fatalf("Load before the first commit: %v, want ErrTableNotFound", err)
		}
		v, err := Commit(ctx, store, planned, []Action{txnAction("w1", 3), addAction("a", "2024-01-01")}, CommitOptions{})
		if err != nil || v != 0 {
			t.Fatalf("first commit = %d, %v", v, err)
		}
		s0, err := Load(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := s0.TxnVersion("w1"); !ok || got != 3 || s0.NumFiles() != 1 ||
			s0.Metadata.SchemaString != planned.Metadata.SchemaString || s0.Metadata.ID != planned.Metadata.ID {
			t.Fatalf("version 0: txn %d %v, %d files, metadata %+v", got, ok, s0.NumFiles(), s0.Metadata)
		}

		// Another writer planned its own table meanwhile: it loses.
		other, err := NewTableSnapshot(testSchema, []string{"day"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Commit(ctx, store, other, []Action{addAction("b", "2024-01-01")}, CommitOptions{}); !isConflict(err, ConflictTableExists) {
			t.Fatalf("second first commit = %v, want ConflictTableExists", err)
		}

		// A metaData among the actions replaces the planned one.
		fresh, err := storage.Open(ctx, memURI(), storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Close()
		widened := planned.Metadata
		widened.SchemaString = strings.Replace(widened.SchemaString, `"fields":[`, `"fields":[{"name":"extra","type":"long","nullable":true,"metadata":{}},`, 1)
		if _, err := Commit(ctx, fresh, planned, []Action{{MetaData: &widened}, addAction("c", "2024-01-01")}, CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		s, err := Load(ctx, fresh)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(s.Metadata.SchemaString, `"extra"`) {
			t.Fatalf("version 0 kept the planned metaData: %s", s.Metadata.SchemaString)
		}
	})
}

func isConflict(err error, kind ConflictKind) bool {
	var ce *ConflictError
	return errors.As(err, &ce) && ce.Kind == kind && errors.Is(err, writers.ErrConflict)
}

func TestConcurrentAppendersRebase(t *testing.T) {
	stores(t, func(t *testing.T, store Store) {
		s0 := create(t, store, nil)
		const n = 6
		var wg sync.WaitGroup
		versions := make([]int64, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				versions[i], errs[i] = Commit(context.Background(), store, s0,
					[]Action{txnAction(fmt.Sprint("w", i), 1), addAction(fmt.Sprint("f", i), "d")}, CommitOptions{})
			})
		}
		wg.Wait()
		seen := map[int64]bool{}
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("appender %d: %v", i, errs[i])
			}
			seen[versions[i]] = true
		}
		s, err := Load(t.Context(), store)
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != n || s.Version != n || s.NumFiles() != n || len(s.Txns()) != n {
			t.Fatalf("versions %v, latest %d, %d files, txns %v", versions, s.Version, s.NumFiles(), s.Txns())
		}
	})
}

func TestCommitConflicts(t *testing.T) {
	stores(t, func(t *testing.T, store Store) {
		ctx := t.Context()
		s0 := create(t, store, nil)
		if _, err := Commit(ctx, store, s0, []Action{addAction("f", "d")}, CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		base, err := Load(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		f := base.Files()[0]
		newMeta := base.Metadata
		newMeta.Configuration = map[string]string{"delta.checkpointInterval": "5"}

		cases := []struct {
			name          string
			winner, loser []Action
			loserOpts     CommitOptions
			want          ConflictKind
		}{
			{"txn same appId", []Action{txnAction("w", 5)}, []Action{txnAction("w", 4), addAction("x", "d")}, CommitOptions{}, ConflictTxn},
			{"remove remove", []Action{{Remove: f.Remove(1, true)}}, []Action{{Remove: f.Remove(2, true)}}, CommitOptions{}, ConflictDeleteDelete},
			{"metadata changed", []Action{{MetaData: &newMeta}}, []Action{addAction("x", "d")}, CommitOptions{}, ConflictMetadata},
			{"append into a read table", []Action{addAction("y", "d")}, []Action{{Remove: f.Remove(2, true)}, addAction("z", "d")}, CommitOptions{ReadWholeTable: true}, ConflictAppend},
			{"delete of a read file", []Action{{Remove: f.Remove(1, true)}}, []Action{addAction("z", "d")}, CommitOptions{ReadFiles: []string{f.Path}}, ConflictDeleteRead},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				// Each case starts from a copy of the table at base.
				tbl := copyTable(t, store, base.Version)
				wv, err := Commit(ctx, tbl, base, c.winner, CommitOptions{})
				if err != nil {
					t.Fatal(err)
				}
				_, err = Commit(ctx, tbl, base, c.loser, c.loserOpts)
				if !isConflict(err, c.want) {
					t.Fatalf("loser = %v, want %s", err, c.want)
				}
				var ce *ConflictError
				errors.As(err, &ce)
				if ce.WinnerVersion != wv {
					t.Errorf("winner version %d, want %d", ce.WinnerVersion, wv)
				}
				if c.want == ConflictTxn && (ce.AppID != "w" || ce.TxnVersion != 5) {
					t.Errorf("txn conflict %+v, want appId w, winner txn 5", ce)
				}
			})
		}
	})
}

// copyTable copies the commits 0..last of store into a fresh mem:// table.
func copyTable(t *testing.T, store Store, last int64) Store {
	t.Helper()
	b := storagetest.Open(t, memURI())
	for v := int64(0); v <= last; v++ {
		data, err := store.Get(t.Context(), CommitKey(v))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.PutIfAbsent(t.Context(), CommitKey(v), data); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// racingStore lets a competitor commit a blind append at the version every
// PutIfAbsent of a commit targets, so each attempt loses.
type racingStore struct {
	Store
	mu   sync.Mutex
	puts int
}

func (r *racingStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	r.mu.Lock()
	r.puts++
	n := r.puts
	r.mu.Unlock()
	other, err := EncodeCommit([]Action{addAction(fmt.Sprint("competitor", n), "d")})
	if err != nil {
		return err
	}
	if err := r.Store.PutIfAbsent(ctx, key, other); err != nil {
		return err
	}
	return r.Store.PutIfAbsent(ctx, key, data)
}

func TestCommitRetriesBounded(t *testing.T) {
	stores(t, func(t *testing.T, store Store) {
		s0 := create(t, store, nil)
		rs := &racingStore{Store: store}
		_, err := Commit(t.Context(), rs, s0, []Action{addAction("mine", "d")}, CommitOptions{MaxAttempts: 4})
		if !isConflict(err, ConflictRetries) {
			t.Fatalf("Commit = %v, want ConflictRetries", err)
		}
		if rs.puts != 4 {
			t.Fatalf("%d attempts, want 4", rs.puts)
		}
		s, err := Load(t.Context(), store)
		if err != nil {
			t.Fatal(err)
		}
		if s.Version != 4 || s.NumFiles() != 4 {
			t.Fatalf("table at v%d with %d files, want the 4 competitors' commits only", s.Version, s.NumFiles())
		}
	})
}

func TestCheckpointEveryN(t *testing.T) {
	stores(t, func(t *testing.T, store Store) {
		ctx := t.Context()
		s := create(t, store, map[string]string{"delta.checkpointInterval": "3"})
		want := map[string]bool{}
		for i := 1; i <= 7; i++ {
			acts := []Action{txnAction("w", int64(i)), addAction(fmt.Sprint("f", i), fmt.Sprint("d", i%2))}
			want[acts[1].Add.Path] = true
			if i == 5 { // one remove, kept as a tombstone
				f := s.Files()[0]
				acts = append(acts, Action{Remove: f.Remove(timeNowMs(), true)})
				delete(want, f.Path)
			}
			if _, err := Commit(ctx, store, s, acts, CommitOptions{}); err != nil {
				t.Fatal(err)
			}
			var err error
			if s, err = s.Update(ctx, store); err != nil {
				t.Fatal(err)
			}
		}
		for _, v := range []int64{3, 6} {
			if _, err := store.Get(ctx, CheckpointKey(v)); err != nil {
				t.Errorf("checkpoint %d: %v", v, err)
			}
		}
		if v, ok := lastCheckpointHint(ctx, store); !ok || v != 6 {
			t.Errorf("_last_checkpoint = %d, %v; want 6", v, ok)
		}
		// Replay from the checkpoint alone: copy only checkpoint 6 and
		// commit 7 into a fresh table.
		tbl, err := storage.Open(ctx, memURI(), storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer tbl.Close()
		for _, key := range []string{CheckpointKey(6), CommitKey(7)} {
			data, err := store.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if err := tbl.Put(ctx, key, data); err != nil {
				t.Fatal(err)
			}
		}
		got, err := Load(ctx, tbl)
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != 7 || got.NumFiles() != len(want) || len(got.Tombstones()) != 1 {
			t.Fatalf("from checkpoint: v%d, %d files, %d tombstones; want v7, %d files, 1 tombstone", got.Version, got.NumFiles(), len(got.Tombstones()), len(want))
		}
		for _, a := range got.Files() {
			if !want[a.Path] || a.Stats == "" || a.PartitionValues["day"] == nil {
				t.Errorf("file %+v not expected or lost stats/partition values", a)
			}
		}
		if v, _ := got.TxnVersion("w"); v != 7 {
			t.Errorf("txn w = %d, want 7", v)
		}
		if got.Metadata.ID != s.Metadata.ID || !reflect.DeepEqual(got.Protocol, s.Protocol) || got.Metadata.SchemaString != s.Metadata.SchemaString {
			t.Errorf("metadata/protocol differ after checkpoint: %+v", got.Metadata)
		}
	})
}

func TestCommitRefusals(t *testing.T) {
	stores(t, func(t *testing.T, store Store) {
		ctx := t.Context()
		s := create(t, store, map[string]string{"delta.appendOnly": "true"})
		if _, err := Commit(ctx, store, s, []Action{addAction("a", "d")}, CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		s, _ = s.Update(ctx, store)
		_, err := Commit(ctx, store, s, []Action{{Remove: s.Files()[0].Remove(1, true)}}, CommitOptions{ReadWholeTable: true})
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("remove on an append-only table = %v, want ErrUnsupported", err)
		}
		_, err = Commit(ctx, store, s, []Action{{CommitInfo: &CommitInfo{}}}, CommitOptions{})
		if !errors.Is(err, writers.ErrInvalid) {
			t.Fatalf("caller commitInfo = %v, want ErrInvalid", err)
		}
	})
}

func timeNowMs() int64 { return time.Now().UnixMilli() }

func TestCommitNormalizesRequiredFields(t *testing.T) {
	stores(t, func(t *testing.T, store Store) {
		s := create(t, store, nil)
		add := &Add{Path: "x.parquet", Size: 1, DataChange: true}
		if _, err := Commit(t.Context(), store, s, []Action{{Add: add}}, CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		raw, err := store.Get(t.Context(), CommitKey(1))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), `"partitionValues":{}`) || add.PartitionValues != nil {
			t.Fatalf("commit %s (caller's add modified: %v)", raw, add.PartitionValues != nil)
		}
		// extendedFileMetadata says partitionValues is present: {}, not omitted.
		if s, err = s.Update(t.Context(), store); err != nil {
			t.Fatal(err)
		}
		remove := add.Remove(timeNowMs(), true)
		if _, err := Commit(t.Context(), store, s, []Action{{Remove: remove}}, CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		if raw, err = store.Get(t.Context(), CommitKey(2)); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), `"extendedFileMetadata":true,"partitionValues":{}`) || remove.PartitionValues != nil {
			t.Fatalf("commit %s (caller's remove modified: %v)", raw, remove.PartitionValues != nil)
		}
	})
}

// TestCommitTurns: committers sharing a Turn publish only while they hold
// it, each loses at most once (to the turns before it, which made its
// snapshot stale), and all land.
func TestCommitTurns(t *testing.T) {
	stores(t, func(t *testing.T, store Store) {
		s0 := create(t, store, nil)
		turn := make(chan struct{}, 1)
		var puts, outside atomic.Int64
		store.(*storage.Bucket).SetFault(func(ctx context.Context, op, key string, do func() error) error {
			if op == "put-if-absent" {
				puts.Add(1)
				if len(turn) == 0 {
					outside.Add(1)
				}
			}
			return do()
		})
		opts := CommitOptions{Turn: func(ctx context.Context) (func(), error) {
			turn <- struct{}{}
			return func() { <-turn }, nil
		}}
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				_, errs[i] = Commit(t.Context(), store, s0, []Action{addAction(fmt.Sprint("f", i), "d")}, opts)
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("committer %d: %v", i, err)
			}
		}
		if o := outside.Load(); o != 0 {
			t.Errorf("%d puts ran outside a turn", o)
		}
		if p := puts.Load(); p > 2*n-1 {
			t.Errorf("%d puts for %d commits: a committer lost more than once", p, n)
		}
		if s, err := Load(t.Context(), store); err != nil || s.Version != n || s.NumFiles() != n {
			t.Fatalf("after %d commits: %v, %v", n, s, err)
		}
	})
}

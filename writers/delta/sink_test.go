package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/storage"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

// tc is a small test harness around one writer.
type tc struct {
	t   *testing.T
	ctx context.Context
	mem *memory.CheckedAllocator
	cfg *Config
	w   *Writer
}

func newTC(t *testing.T, uri string, change ...func(*Config)) *tc {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	cfg := testConfig(uri, change...)
	return &tc{t: t, ctx: context.Background(), mem: mem, cfg: cfg, w: openWriter(t, cfg, mem)}
}

// put writes recs under key, precommits and commits, returning the commit.
func (c *tc) put(key writers.TxnKey, recs ...arrow.RecordBatch) writers.CommitInfo {
	c.t.Helper()
	for _, rec := range recs {
		err := c.w.Write(c.ctx, key, rec)
		rec.Release()
		if err != nil {
			c.t.Fatalf("Write: %v", err)
		}
	}
	d, err := c.w.Precommit(c.ctx, key)
	if err != nil {
		c.t.Fatal(err)
	}
	info, err := c.w.Commit(c.ctx, key, []writers.Descriptor{d})
	if err != nil {
		c.t.Fatalf("Commit: %v", err)
	}
	return info
}

func (c *tc) ids(start, n int) arrow.RecordBatch {
	return idRecord(c.mem, writertest.Schema(), start, n)
}

// dataObjects lists the Parquet objects under the table root.
func (c *tc) dataObjects() []string {
	c.t.Helper()
	b, err := storage.Open(c.ctx, c.cfg.TableURI, storage.Options{})
	if err != nil {
		c.t.Fatal(err)
	}
	defer b.Close()
	var keys []string
	for o, err := range b.List(c.ctx, "", "") {
		if err != nil {
			c.t.Fatal(err)
		}
		if strings.HasSuffix(o.Key, ".parquet") && !strings.HasPrefix(o.Key, "_delta_log/") {
			keys = append(keys, o.Key)
		}
	}
	return keys
}

func TestOverwrite(t *testing.T) {
	c := newTC(t, memURI(t), func(cfg *Config) { cfg.WriteMode = ModeOverwrite })
	c.put(writers.AutoKey("a"), c.ids(0, 10))
	info := c.put(writers.TxnKey{Writer: "job", Epoch: 1}, c.ids(100, 4), c.ids(104, 3))
	snap := snapshot(t, c.cfg)
	if snap.Version != info.Version {
		t.Fatalf("table at version %d, commit answered %d", snap.Version, info.Version)
	}
	if got := publishedRows(t, c.cfg); got != 7 {
		t.Fatalf("%d rows after the overwrite, want the 7 of the last commit", got)
	}
	ci, _ := snap.CommitInfo()
	if ci == nil || ci.IsBlindAppend == nil || *ci.IsBlindAppend {
		t.Fatalf("overwrite commitInfo %+v: want isBlindAppend false", ci)
	}
	if n := len(snap.Tombstones()); n != 1 {
		t.Fatalf("%d tombstones, want the 1 file of the first commit", n)
	}
}

func TestAppendRollsFilesInOneCommit(t *testing.T) {
	c := newTC(t, fileURI(t), func(cfg *Config) {
		cfg.TargetFileBytes = 4 << 10
		cfg.Parquet.RowGroupRows = 200
	})
	key := writers.AutoKey("big")
	var recs []arrow.RecordBatch
	for i := range 10 {
		recs = append(recs, c.ids(i*1000, 1000))
	}
	info := c.put(key, recs...)
	snap := snapshot(t, c.cfg)
	if info.Version != 0 || snap.Version != 0 {
		t.Fatalf("commit version %d, table version %d: want one commit, the one creating the table", info.Version, snap.Version)
	}
	if n := len(snap.Files()); n < 5 {
		t.Fatalf("%d files for 10000 rows at 4 KiB per file, want the stream rolled into several", n)
	}
	if got := publishedRows(t, c.cfg); got != 10000 {
		t.Fatalf("%d rows published, want 10000", got)
	}
	if ci, _ := snap.CommitInfo(); ci == nil || ci.IsBlindAppend == nil || !*ci.IsBlindAppend {
		t.Fatalf("append commitInfo %+v: want isBlindAppend true", ci)
	}
}

func TestRollbackLeavesNoTrace(t *testing.T) {
	c := newTC(t, fileURI(t), func(cfg *Config) { cfg.TargetFileBytes = 1 << 10 })
	c.put(writers.AutoKey("first"), c.ids(0, 5)) // the table exists
	before := len(c.dataObjects())

	staged := writers.TxnKey{Writer: "job", Epoch: 1}
	for i := range 4 {
		rec := c.ids(i*500, 500)
		if err := c.w.Write(c.ctx, staged, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	// Encoders finish files in the background: wait for one.
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for deadline := time.Now().Add(10 * time.Second); len(c.dataObjects()) == before; <-poll.C {
		if time.Now().After(deadline) {
			t.Fatal("no file was finished while writing: the test does not exercise deleting them")
		}
	}
	if err := c.w.Rollback(c.ctx, staged); err != nil {
		t.Fatal(err)
	}
	if after := len(c.dataObjects()); after != before {
		t.Fatalf("%d data files after rolling back staged rows, want %d", after, before)
	}

	// Precommitted files stay: a commit elsewhere may still publish them.
	pre := writers.TxnKey{Writer: "job", Epoch: 2}
	rec := c.ids(0, 500)
	if err := c.w.Write(c.ctx, pre, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	d, err := c.w.Precommit(c.ctx, pre)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.w.Rollback(c.ctx, pre); err != nil {
		t.Fatal(err)
	}
	if len(c.dataObjects()) == before {
		t.Fatal("rollback deleted precommitted files")
	}
	if got := publishedRows(t, c.cfg); got != 5 {
		t.Fatalf("%d rows published, want 5", got)
	}
	if _, err := c.w.Commit(c.ctx, pre, []writers.Descriptor{d}); err != nil {
		t.Fatalf("committing a descriptor after the rollback of its key: %v", err)
	}
	if got := publishedRows(t, c.cfg); got != 505 {
		t.Fatalf("%d rows published, want 505", got)
	}
}

func TestPartitioned(t *testing.T) {
	c := newTC(t, fileURI(t), func(cfg *Config) { cfg.PartitionBy = []string{"name"} })
	schema := writertest.Schema()
	b := array.NewRecordBuilder(c.mem, schema)
	values := []string{"a/b", "x:y", "p q", "100%", ""}
	for i := range 50 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%6 == 5 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(values[i%len(values)])
		}
	}
	rec := b.NewRecordBatch()
	b.Release()
	c.put(writers.AutoKey("p"), rec)

	snap := snapshot(t, c.cfg)
	rows := map[string]int64{}
	for _, a := range snap.Files() {
		key, err := deltalog.DecodePath(a.Path)
		if err != nil {
			t.Fatal(err)
		}
		v := a.PartitionValues["name"]
		want := deltalayout.PartitionDir([]string{"name"}, a.PartitionValues)
		if !strings.HasPrefix(key, want) {
			t.Errorf("file %s is not in its partition directory %s", key, want)
		}
		if v == nil {
			rows["<null>"] += statsRows(t, a)
		} else {
			rows[*v] += statsRows(t, a)
		}
	}
	// "" is null in Delta; every sixth row is null too.
	want := map[string]int64{}
	for i := range 50 {
		switch v := values[i%len(values)]; {
		case i%6 == 5 || v == "":
			want["<null>"]++
		default:
			want[v]++
		}
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("rows per partition %v, want %v", rows, want)
	}
	if got, ok := snapshotDirs(t, c.cfg)["name=a%2Fb"]; !ok || got == 0 {
		t.Fatalf("no Hive-escaped directory name=a%%2Fb: %v", snapshotDirs(t, c.cfg))
	}
	// Partition columns are not stored in the files.
	for _, rec := range readTable(t, c.cfg, c.mem) {
		if rec.Schema().HasField("name") {
			t.Error("a data file holds the partition column")
		}
		rec.Release()
	}
}

// snapshotDirs counts files per partition directory (storage names).
func snapshotDirs(t *testing.T, cfg *Config) map[string]int {
	out := map[string]int{}
	for _, a := range snapshot(t, cfg).Files() {
		key, _ := deltalog.DecodePath(a.Path)
		dir, _, _ := strings.Cut(key, "/")
		out[dir]++
	}
	return out
}

func TestSchemaEvolution(t *testing.T) {
	wide := arrow.NewSchema(append(writertest.Schema().Fields(),
		arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), nil)
	wideRec := func(c *tc, nullable bool) arrow.RecordBatch {
		s := wide
		if !nullable {
			f := wide.Fields()
			f[2].Nullable = false
			s = arrow.NewSchema(f, nil)
		}
		b := array.NewRecordBuilder(c.mem, s)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).Append(1)
		b.Field(1).(*array.StringBuilder).Append("x")
		b.Field(2).(*array.Float64Builder).Append(2.5)
		return b.NewRecordBatch()
	}

	t.Run("add_columns", func(t *testing.T) {
		c := newTC(t, memURI(t), func(cfg *Config) { cfg.SchemaEvolution = EvolveAddColumns })
		c.put(writers.AutoKey("a"), c.ids(0, 3))
		c.put(writers.TxnKey{Writer: "job", Epoch: 1}, wideRec(c, true))
		got, err := c.w.Schema(c.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := got.FieldsByName("extra"); !ok || !f[0].Nullable {
			t.Fatalf("table schema after evolving: %v", got)
		}
		if got := publishedRows(t, c.cfg); got != 4 {
			t.Fatalf("%d rows, want 4", got)
		}
		// A client that does not know the added column still writes
		// (TestMissingNullableColumns).
		c.put(writers.AutoKey("b"), c.ids(10, 1))
		if got := publishedRows(t, c.cfg); got != 5 {
			t.Fatalf("%d rows, want 5", got)
		}
	})
	t.Run("timestamp_ntz", func(t *testing.T) {
		// The column needs the timestampNtz feature: the commit adding
		// it upgrades the protocol (delta-kernel-rs refuses it otherwise).
		c := newTC(t, memURI(t), func(cfg *Config) { cfg.SchemaEvolution = EvolveAddColumns })
		c.put(writers.AutoKey("a"), c.ids(0, 3))
		ntz := arrow.NewSchema(append(writertest.Schema().Fields(),
			arrow.Field{Name: "local", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true}), nil)
		b := array.NewRecordBuilder(c.mem, ntz)
		b.Field(0).(*array.Int64Builder).Append(1)
		b.Field(1).(*array.StringBuilder).Append("x")
		b.Field(2).(*array.TimestampBuilder).Append(1)
		rec := b.NewRecordBatch()
		b.Release()
		c.put(writers.AutoKey("b"), rec)
		p := snapshot(t, c.cfg).Protocol
		if p.MinReaderVersion != 3 || p.MinWriterVersion != 7 || !slices.Contains(p.ReaderFeatures, "timestampNtz") || !slices.Contains(p.WriterFeatures, "timestampNtz") {
			t.Fatalf("protocol after adding a timestamp_ntz column: %+v", p)
		}
	})
	t.Run("non-nullable", func(t *testing.T) {
		c := newTC(t, memURI(t), func(cfg *Config) { cfg.SchemaEvolution = EvolveAddColumns })
		c.put(writers.AutoKey("a"), c.ids(0, 3))
		rec := wideRec(c, false)
		defer rec.Release()
		if err := c.w.Write(c.ctx, writers.AutoKey("b"), rec); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), `"extra"`) {
			t.Fatalf("a new non-nullable column: %v, want ErrInvalid naming it", err)
		}
	})
	t.Run("reject", func(t *testing.T) {
		c := newTC(t, memURI(t))
		c.put(writers.AutoKey("a"), c.ids(0, 3))
		rec := wideRec(c, true)
		defer rec.Release()
		if err := c.w.Write(c.ctx, writers.AutoKey("b"), rec); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), `"extra"`) {
			t.Fatalf("a new column under reject: %v, want ErrInvalid naming it", err)
		}
	})
	t.Run("type-change", func(t *testing.T) {
		c := newTC(t, memURI(t), func(cfg *Config) { cfg.SchemaEvolution = EvolveAddColumns })
		c.put(writers.AutoKey("a"), c.ids(0, 3))
		b := array.NewRecordBuilder(c.mem, arrow.NewSchema([]arrow.Field{
			{Name: "id", Type: arrow.PrimitiveTypes.Int32},
			{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		}, nil))
		b.Field(0).(*array.Int32Builder).Append(1)
		b.Field(1).(*array.StringBuilder).Append("x")
		rec := b.NewRecordBatch()
		b.Release()
		defer rec.Release()
		if err := c.w.Write(c.ctx, writers.AutoKey("b"), rec); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), `"id"`) {
			t.Fatalf("a changed type: %v, want ErrInvalid naming the column", err)
		}
	})
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	t.Run("missing-table", func(t *testing.T) {
		w, err := New(testConfig(memURI(t)), writers.Env{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Check(ctx); err != nil {
			t.Fatalf("Check of a table to be created: %v", err)
		}
	})
	t.Run("partition-mismatch", func(t *testing.T) {
		c := newTC(t, memURI(t))
		c.put(writers.AutoKey("a"), c.ids(0, 3))
		w, err := New(testConfig(c.cfg.TableURI, func(cfg *Config) { cfg.PartitionBy = []string{"name"} }), writers.Env{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Check(ctx); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "partition_by") {
			t.Fatalf("Check: %v, want ErrInvalid about partition_by", err)
		}
		if err := w.Open(ctx); !errors.Is(err, writers.ErrInvalid) {
			t.Fatalf("Open: %v, want ErrInvalid", err)
		}
	})
	t.Run("unsupported-feature", func(t *testing.T) {
		uri := memURI(t)
		b, err := storage.Open(ctx, uri, storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		commit := `{"protocol":{"minReaderVersion":1,"minWriterVersion":7,"writerFeatures":["materializePartitionColumns"]}}
{"metaData":{"id":"x","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[{\"name\":\"id\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}}]}","partitionColumns":[],"configuration":{}}}
`
		if err := b.Put(ctx, deltalog.CommitKey(0), []byte(commit)); err != nil {
			t.Fatal(err)
		}
		w, err := New(testConfig(uri), writers.Env{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Check(ctx); !errors.Is(err, deltalog.ErrUnsupported) || !strings.Contains(err.Error(), "materializePartitionColumns") {
			t.Fatalf("Check: %v, want ErrUnsupported naming materializePartitionColumns", err)
		}
	})
}

func TestCommitRefusesForeignDescriptor(t *testing.T) {
	c := newTC(t, memURI(t))
	c.put(writers.AutoKey("a"), c.ids(0, 3))
	other := newTC(t, memURI(t), func(cfg *Config) { cfg.PartitionBy = []string{"name"} })
	key := writers.TxnKey{Writer: "job", Epoch: 1}
	rec := other.ids(0, 3)
	if err := other.w.Write(other.ctx, key, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	d, err := other.w.Precommit(other.ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.w.Commit(c.ctx, key, []writers.Descriptor{d}); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("commit of a descriptor for another partitioning: %v, want ErrInvalid", err)
	}
	if _, ok, _ := c.w.CommittedEpoch(c.ctx, "job"); ok {
		t.Fatal("the refused commit recorded the epoch")
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	mem := checkedMem(t)
	cfg := testConfig(memURI(t))
	w, err := New(cfg, writers.Env{Registerer: reg, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	c := &tc{t: t, ctx: ctx, mem: mem, cfg: cfg, w: w}
	c.put(writers.TxnKey{Writer: "job", Epoch: 1}, c.ids(0, 10))
	c.put(writers.TxnKey{Writer: "job", Epoch: 1}, c.ids(0, 10)) // replayed
	for name, want := range map[string]float64{
		"quiver_delta_files_written_total": 2, // the replay wrote its file too, unpublished
		"quiver_delta_table_version":       0, // the first commit creates the table
	} {
		if got := gathered(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "quiver_delta_commits_total"); err != nil || n != 2 {
		t.Errorf("quiver_delta_commits_total series: %d, %v; want committed and replayed", n, err)
	}
}

// gathered returns the value of the single sample of metric name.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// TestHandedDescriptorPublishedOnce: a descriptor handed to another key's
// commit is published there; committing it again under its own key adds
// none of its files a second time (append), and an overwrite keeps them
// live while removing every other file.
func TestHandedDescriptorPublishedOnce(t *testing.T) {
	for _, mode := range []string{ModeAppend, ModeOverwrite} {
		t.Run(mode, func(t *testing.T) {
			c := newTC(t, memURI(t), func(cfg *Config) { cfg.WriteMode = mode })
			a, b := writers.TxnKey{Writer: "a", Epoch: 1}, writers.TxnKey{Writer: "b", Epoch: 1}
			var descs []writers.Descriptor
			for i, key := range []writers.TxnKey{a, b} {
				rec := c.ids(i*10, 10)
				if err := c.w.Write(c.ctx, key, rec); err != nil {
					t.Fatal(err)
				}
				rec.Release()
				d, err := c.w.Precommit(c.ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				descs = append(descs, d)
			}
			if _, err := c.w.Commit(c.ctx, a, descs); err != nil {
				t.Fatal(err)
			}
			if _, err := c.w.Commit(c.ctx, b, descs[1:]); err != nil {
				t.Fatal(err)
			}
			files, rows := 2, int64(20)
			if mode == ModeOverwrite {
				files, rows = 1, 10
			}
			snap := snapshot(t, c.cfg)
			if n := len(snap.Files()); n != files {
				t.Fatalf("%d live files, want %d", n, files)
			}
			if got := publishedRows(t, c.cfg); got != rows {
				t.Fatalf("%d rows, want %d", got, rows)
			}
			if v, ok := snap.TxnVersion("b"); !ok || v != 1 {
				t.Fatalf("txn of b = %d, %v; want 1", v, ok)
			}
		})
	}
}

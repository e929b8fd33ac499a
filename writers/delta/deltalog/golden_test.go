package deltalog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/storage"
)

const goldenDir = "../../../../shared/testdata/delta-golden"

// openGolden opens a golden table read-only (tests never write into it).
func openGolden(t *testing.T, name string) *storage.Bucket {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("golden tables not available (they live in ../shared/testdata/delta-golden beside the repository): %v", err)
	}
	b, err := storage.Open(context.Background(), "file://"+dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

type goldenCase struct {
	version     int64
	rows        int64 // sum of numRecords minus DV cardinalities; -1: stats incomplete, not checked
	files       int   // live files; -1: not checked
	tombstones  int   // -1: not checked
	txn         map[string]int64
	domains     int
	refuseRead  string // feature CheckReadable must name ("" = readable)
	refuseWrite string
	loadErr     string
}

// goldenTables holds what shared/testdata/delta-golden/README.md states
// for every table (versions, rows, live files, txns, refusals).
var goldenTables = map[string]goldenCase{
	"simple_table":                    {version: 4, rows: -1, files: 5, tombstones: 31},
	"delta-0.8.0":                     {version: 1, rows: 4, files: 2, tombstones: 1},
	"delta-0.8-empty":                 {version: 1, rows: 0, files: 0, tombstones: -1},
	"snapshot-data2-deleted":          {version: 4, rows: -1, files: 3, tombstones: -1},
	"basic-with-inserts-merge":        {version: 1, rows: 140, files: -1, tombstones: -1},
	"basic-with-inserts-updates":      {version: 1, rows: 100, files: -1, tombstones: -1},
	"log-replay-special-characters-a": {version: 1, rows: 0, files: 0, tombstones: 1},
	"versions-not-contiguous":         {loadErr: "versions are not contiguous"},
	"deltalog-invalid-protocol-version": {version: 0, rows: -1, files: -1, tombstones: -1,
		refuseRead: `reader version "99"`, refuseWrite: `reader version "99"`},

	"basic-with-inserts-deletes-checkpoint": {version: 13, rows: 41, files: -1, tombstones: -1},
	"simple_table_with_checkpoint":          {version: 10, rows: -1, files: 11, tombstones: -1},
	"multi-part-checkpoint":                 {version: 1, rows: 31, files: -1, tombstones: -1},
	"only-checkpoint-files":                 {version: 2, rows: 25, files: -1, tombstones: -1},
	"corrupted-last-checkpoint-kernel":      {version: 11, rows: 100, files: -1, tombstones: -1},
	"table_failed_last_checkpoint_update":   {version: 3, rows: 20, files: -1, tombstones: -1},
	"with_checkpoint_no_last_checkpoint":    {version: 3, rows: -1, files: 1, tombstones: 2},
	"checkpoints_vacuumed":                  {version: 12, rows: -1, files: 12, tombstones: -1},
	// The v10 checkpoint has only stats_parsed: JSON stats survive for the
	// two files added by commits 11–12 (README).
	"delta-1.2.1-only-struct-stats": {version: 12, rows: -1, files: 12, tombstones: -1},
	"v2-checkpoint-parquet": {version: 2, rows: 10, files: -1, tombstones: -1,
		refuseRead: `"v2Checkpoint"`, refuseWrite: `"v2Checkpoint"`},
	"v2-checkpoint-json": {version: 2, rows: 10, files: -1, tombstones: -1,
		refuseRead: `"v2Checkpoint"`, refuseWrite: `"v2Checkpoint"`},
	"checkpoint-v2-table": {version: 9, rows: 44, files: -1, tombstones: -1,
		refuseRead: `"v2Checkpoint"`, refuseWrite: `"v2Checkpoint"`},
	"table-with-domain-metadata": {version: 108, rows: -1, files: 109, tombstones: -1, domains: 3,
		refuseWrite: `"rowTracking"`},

	"delta-0.2.0":         {version: 3, rows: -1, files: 3, tombstones: 4, txn: map[string]int64{"e4a20b59-dd0e-4c50-b074-e8ae4786df30": 0}},
	"deltalog-getChanges": {version: 2, rows: 0, files: 0, tombstones: -1, txn: map[string]int64{"fakeAppId": 3}},

	"delta-0.8.0-partitioned":                {version: 0, rows: -1, files: 6, tombstones: 0},
	"delta-0.8.0-null-partition":             {version: 0, rows: -1, files: 2, tombstones: 0},
	"delta-0.8.0-special-partition":          {version: 0, rows: -1, files: 2, tombstones: 0},
	"data-reader-escaped-chars":              {version: 2, rows: -1, files: 3, tombstones: 0},
	"data-reader-partition-values":           {version: 0, rows: -1, files: 3, tombstones: 0},
	"delta-2.2.0-partitioned-types":          {version: 0, rows: 3, files: 3, tombstones: 0},
	"kernel-timestamp-partition-col-ISO8601": {version: 0, rows: 2, files: 2, tombstones: 0},

	"data-reader-primitives":              {version: 0, rows: -1, files: -1, tombstones: -1},
	"data-reader-nested-struct":           {version: 0, rows: -1, files: -1, tombstones: -1},
	"data-reader-map":                     {version: 0, rows: -1, files: -1, tombstones: -1},
	"data-reader-array-primitives":        {version: 0, rows: -1, files: -1, tombstones: -1},
	"decimal-various-scale-precision":     {version: 0, rows: 3, files: -1, tombstones: -1},
	"parquet-all-types":                   {version: 0, rows: 200, files: -1, tombstones: -1},
	"kernel-timestamp-INT96":              {version: 0, rows: 5, files: -1, tombstones: -1},
	"data-reader-timestamp_ntz":           {version: 1, rows: 9, files: -1, tombstones: -1},
	"data-skipping-basic-stats-all-types": {version: 0, rows: 1, files: 1, tombstones: -1},
	"type-widening": {version: 2, rows: 2, files: -1, tombstones: -1,
		refuseRead: `"typeWidening-preview"`, refuseWrite: `"typeWidening-preview"`},

	"table-with-dv-small":            {version: 1, rows: 8, files: 1, tombstones: -1},
	"log-replay-dv-key-cases":        {version: 3, rows: 47, files: 1, tombstones: -1},
	"dv-partitioned-with-checkpoint": {version: 15, rows: 35, files: -1, tombstones: -1},
	"table_with_deletion_logs":       {version: 20, rows: 98, files: 1, tombstones: -1},
	"table-with-columnmapping-mode-name": {version: 0, rows: 6, files: -1, tombstones: -1,
		refuseRead: `"columnMapping"`, refuseWrite: `"columnMapping"`},
	"table-with-columnmapping-mode-id": {version: 0, rows: 6, files: -1, tombstones: -1,
		refuseRead: `"columnMapping"`, refuseWrite: `"columnMapping"`},
	"table_with_column_mapping": {version: 0, rows: 5, files: -1, tombstones: -1,
		refuseRead: `"columnMapping"`, refuseWrite: `"columnMapping"`},
	"table-with-icebegCompatV2Enabled": {version: 0, rows: 6, files: -1, tombstones: -1,
		refuseRead: `"columnMapping"`, refuseWrite: `"columnMapping"`},
	"basic-with-vacuum-protocol-check-feature": {version: 1, rows: 100, files: -1, tombstones: -1},
	"spark-variant-checkpoint": {version: 2, rows: 102, files: -1, tombstones: -1,
		refuseRead: `"variantType-preview"`, refuseWrite: `"variantType-preview"`},
	"simple_table_features": {version: 4, rows: -1, files: 5, tombstones: -1,
		refuseRead: `reader version "5"`, refuseWrite: `reader version "5"`},
	"cdf-table":     {version: 3, rows: 9, files: -1, tombstones: -1},
	"cdc_ict_table": {version: 3, rows: 2, files: -1, tombstones: -1},
	"commit-info-containing-arbitrary-operationParams-types": {version: 2, rows: 2, files: -1, tombstones: -1},
}

func TestGoldenTables(t *testing.T) {
	entries, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatalf("golden tables not available (they live in ../shared/testdata/delta-golden beside the repository): %v", err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) != len(goldenTables) {
		t.Errorf("%d golden tables on disk, %d expectations: keep them in sync", len(dirs), len(goldenTables))
	}
	for _, name := range dirs {
		want, ok := goldenTables[name]
		t.Run(name, func(t *testing.T) {
			if !ok {
				t.Fatalf("no expectation for golden table %s", name)
			}
			ctx := t.Context()
			s, err := Load(ctx, openGolden(t, name))
			if want.loadErr != "" {
				if err == nil || !strings.Contains(err.Error(), want.loadErr) || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Load = %v, want an ErrCorrupt naming %q", err, want.loadErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if s.Version != want.version {
				t.Errorf("version %d, want %d", s.Version, want.version)
			}
			if want.rows >= 0 {
				rows, complete := s.NumRecords()
				if !complete || rows != want.rows {
					t.Errorf("rows %d (complete %v), want %d", rows, complete, want.rows)
				}
			}
			if want.files >= 0 && s.NumFiles() != want.files {
				t.Errorf("%d live files, want %d", s.NumFiles(), want.files)
			}
			if want.tombstones >= 0 && len(s.Tombstones()) != want.tombstones {
				t.Errorf("%d tombstones, want %d", len(s.Tombstones()), want.tombstones)
			}
			if len(s.Txns()) != len(want.txn) {
				t.Errorf("txns %v, want %v", s.Txns(), want.txn)
			}
			for app, v := range want.txn {
				if got, ok := s.TxnVersion(app); !ok || got != v {
					t.Errorf("txn %q = %d, %v; want %d", app, got, ok, v)
				}
			}
			if len(s.Domains()) != want.domains {
				t.Errorf("%d domains, want %d", len(s.Domains()), want.domains)
			}
			checkRefusal(t, "CheckReadable", CheckReadable(s), want.refuseRead)
			checkRefusal(t, "CheckWritable", CheckWritable(s), want.refuseWrite)
			if CheckReadable(s) == nil {
				if _, err := s.Schema(); err != nil {
					t.Errorf("schema: %v", err)
				}
			}
		})
	}
}

func checkRefusal(t *testing.T, what string, err error, feature string) {
	t.Helper()
	switch {
	case feature == "" && err != nil:
		t.Errorf("%s: %v, want nil", what, err)
	case feature != "" && (err == nil || !strings.Contains(err.Error(), feature) ||
		!errors.Is(err, ErrUnsupported) || !errors.Is(err, writers.ErrInvalid)):
		t.Errorf("%s: %v, want ErrUnsupported naming %s", what, err, feature)
	}
}

func filePaths(s *Snapshot) []string {
	var out []string
	for _, a := range s.Files() {
		out = append(out, a.Path)
	}
	return out
}

func TestGoldenDetails(t *testing.T) {
	ctx := t.Context()
	load := func(t *testing.T, name string, version int64) *Snapshot {
		t.Helper()
		s, err := LoadVersion(ctx, openGolden(t, name), version)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("delta-0.8.0 tombstone", func(t *testing.T) {
		s := load(t, "delta-0.8.0", -1)
		ts := s.Tombstones()
		if len(ts) != 1 || ts[0].Path != "part-00001-911a94a2-43f6-4acb-8620-5e68c2654989-c000.snappy.parquet" ||
			ts[0].DeletionTimestamp == nil || *ts[0].DeletionTimestamp != 1615043776198 {
			t.Fatalf("tombstones %+v", ts)
		}
		if v0 := load(t, "delta-0.8.0", 0); v0.NumFiles() != 2 {
			t.Errorf("v0 has %d files, want 2", v0.NumFiles())
		}
		for _, a := range s.Files() {
			st, err := ParseStats(a.Stats)
			if err != nil {
				t.Fatal(err)
			}
			if n, ok := st.Nulls("value"); !ok || n != 0 {
				t.Errorf("%s nullCount.value = %d, %v", a.Path, n, ok)
			}
		}
	})
	t.Run("simple_table time travel ignores .tmp", func(t *testing.T) {
		if s := load(t, "simple_table", 0); s.Version != 0 || s.NumFiles() == 0 {
			t.Fatalf("v0: version %d, %d files", s.Version, s.NumFiles())
		}
		_, err := LoadVersion(ctx, openGolden(t, "simple_table"), 5)
		if !errors.Is(err, writers.ErrNotFound) {
			t.Fatalf("version 5 (only in .tmp/) = %v, want ErrNotFound", err)
		}
	})
	t.Run("simple_table_with_checkpoint incremental update", func(t *testing.T) {
		b := openGolden(t, "simple_table_with_checkpoint")
		v0 := load(t, "simple_table_with_checkpoint", 0)
		latest := load(t, "simple_table_with_checkpoint", -1)
		updated, err := v0.Update(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if updated.Version != 10 || !slices.Equal(filePaths(updated), filePaths(latest)) {
			t.Fatalf("updated v%d %v, latest %v", updated.Version, filePaths(updated), filePaths(latest))
		}
		if v0.Version != 0 {
			t.Fatalf("Update modified its receiver")
		}
	})
	t.Run("null partition", func(t *testing.T) {
		s := load(t, "delta-0.8.0-null-partition", -1)
		got := map[string]string{}
		for _, a := range s.Files() {
			v := a.PartitionValues["k"]
			k := "<null>"
			if v != nil {
				k = *v
			}
			got[k] = a.Path
			key, err := DecodePath(a.Path)
			if err != nil {
				t.Fatal(err)
			}
			if want := PartitionDir([]string{"k"}, a.PartitionValues); !strings.HasPrefix(key, want) {
				t.Errorf("key %q does not start with %q", key, want)
			}
		}
		if !strings.HasPrefix(got["A"], "k=A/part-00000-b1f1dbbb") || !strings.HasPrefix(got["<null>"], "k=__HIVE_DEFAULT_PARTITION__/part-00001-8474ac85") {
			t.Fatalf("files by partition %v", got)
		}
	})
	t.Run("escaped partition paths round trip", func(t *testing.T) {
		for _, name := range []string{"delta-0.8.0-special-partition", "data-reader-escaped-chars"} {
			s := load(t, name, -1)
			for _, a := range s.Files() {
				key, err := DecodePath(a.Path)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(goldenDir, name, key)); err != nil {
					t.Errorf("%s: decoded key %q: %v", name, key, err)
				}
				col := s.Metadata.PartitionColumns[0]
				if strings.Contains(*a.PartitionValues[col], " ") {
					continue // that writer also escaped spaces; our escape set is conservative
				}
				dir := PartitionDir([]string{col}, a.PartitionValues)
				if !strings.HasPrefix(key, dir) || !strings.HasPrefix(a.Path, EncodePath(dir)) {
					t.Errorf("%s: key %q path %q, our dir %q", name, key, a.Path, dir)
				}
			}
		}
	})
	t.Run("ISO 8601 timestamp partition", func(t *testing.T) {
		s := load(t, "kernel-timestamp-partition-col-ISO8601", -1)
		schema, err := s.Schema()
		if err != nil {
			t.Fatal(err)
		}
		var micros []int64
		for _, a := range s.Files() {
			for col, v := range a.PartitionValues {
				f, _ := schema.Field(col)
				if f.Type.Name != "timestamp" {
					continue
				}
				got, err := ParsePartitionValue(v, f.Type)
				if err != nil {
					t.Fatal(err)
				}
				micros = append(micros, got.(interface{ UnixMicro() int64 }).UnixMicro())
			}
		}
		slices.Sort(micros)
		if !slices.Equal(micros, []int64{1704103200000000, 1704198600000000}) {
			t.Fatalf("timestamps %v", micros)
		}
	})
	t.Run("deletion vector key", func(t *testing.T) {
		s := load(t, "log-replay-dv-key-cases", -1)
		f := s.Files()
		if len(f) != 1 || f[0].DeletionVector == nil || f[0].DeletionVector.Cardinality != 3 {
			t.Fatalf("files %+v", f)
		}
	})
}

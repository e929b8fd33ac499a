package deltalog

import (
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-ingest/quiver/internal/deltagolden"
	"github.com/quiver-ingest/quiver/writers"
)

// goldenDir holds the reference tables (deltagolden); its README
// documents each table and the facts asserted here.
var goldenDir = deltagolden.Dir()

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

// goldenTables holds what testdata/delta-golden/README.md states for
// every table (versions, rows, live files, txns, refusals).
var goldenTables = map[string]goldenCase{
	"basic-append-overwrite":  {version: 3, rows: 7, files: 3, tombstones: 2},
	"basic-update":            {version: 1, rows: 100, files: -1, tombstones: -1},
	"basic-merge":             {version: 1, rows: 140, files: -1, tombstones: -1},
	"empty-after-delete":      {version: 1, rows: 0, files: 0, tombstones: 2},
	"special-chars-path":      {version: 1, rows: 0, files: 0, tombstones: 1},
	"versions-not-contiguous": {loadErr: "versions are not contiguous"},
	"protocol-reader-99": {version: 0, rows: 1, files: 1, tombstones: 0,
		refuseRead: `reader version "99"`, refuseWrite: `reader version "99"`},
	"unknown-reader-feature": {version: 1, rows: 1, files: 1, tombstones: 0,
		refuseRead: `"quiverUnknownFeature"`, refuseWrite: `"quiverUnknownFeature"`},
	"commit-info-arbitrary": {version: 1, rows: 2, files: 2, tombstones: 0},

	"checkpoint-classic":      {version: 13, rows: 80, files: 10, tombstones: 4},
	"checkpoint-corrupt-last": {version: 13, rows: 80, files: 10, tombstones: 4},
	"checkpoint-no-last":      {version: 13, rows: 80, files: 10, tombstones: 4},
	"checkpoint-stale-last":   {version: 5, rows: 5, files: 5, tombstones: 0},
	"checkpoint-log-cleaned":  {version: 12, rows: 12, files: 12, tombstones: 0},
	"checkpoint-multipart":    {version: 2, rows: 31, files: 4, tombstones: 0},
	// The v10 checkpoint has only stats_parsed: JSON stats survive for the
	// two files added by commits 11–12 (README).
	"checkpoint-struct-stats": {version: 12, rows: -1, files: 12, tombstones: 0},
	"checkpoint-v2-parquet":   {version: 2, rows: 10, files: 2, tombstones: -1},
	"checkpoint-v2-json":      {version: 2, rows: 10, files: 2, tombstones: -1},
	"domain-metadata":         {version: 2, rows: 6, files: -1, tombstones: -1, domains: 2},

	"txn-app-ids": {version: 4, rows: 4, files: 4, tombstones: 0, txn: map[string]int64{"app-a": 3, "app-b": 7}},

	"partition-null":             {version: 0, rows: 2, files: 2, tombstones: 0},
	"partition-escaped":          {version: 0, rows: 5, files: 5, tombstones: 0},
	"partition-types":            {version: 0, rows: 3, files: 3, tombstones: 0},
	"partition-timestamp-legacy": {version: 0, rows: 2, files: 2, tombstones: 0},

	"types-all":             {version: 0, rows: 11, files: 1, tombstones: 0},
	"types-timestamp-int96": {version: 0, rows: 5, files: 4, tombstones: 0},
	"types-timestamp-ntz":   {version: 0, rows: 9, files: -1, tombstones: 0},
	"type-widening":         {version: 3, rows: 2, files: 2, tombstones: -1},
	"variant": {version: 3, rows: 3, files: 3, tombstones: 0,
		refuseRead: `"variantType"`, refuseWrite: `"variantType"`},

	"dv-small":                  {version: 2, rows: 8, files: 1, tombstones: 1},
	"dv-same-file":              {version: 4, rows: 47, files: 1, tombstones: 3},
	"dv-partitioned-checkpoint": {version: 16, rows: 35, files: 10, tombstones: -1},
	"dv-large":                  {version: 2, rows: 35000, files: 2, tombstones: 2},
	"column-mapping-name":       {version: 1, rows: 3, files: -1, tombstones: 0},
	"column-mapping-id":         {version: 1, rows: 3, files: -1, tombstones: 0},
	"iceberg-compat-v2": {version: 1, rows: 3, files: -1, tombstones: 0,
		refuseWrite: `"icebergCompatV2"`},
	"vacuum-protocol-check": {version: 1, rows: 100, files: 2, tombstones: 0},
	"change-data-feed":      {version: 3, rows: 3, files: -1, tombstones: -1},
	"in-commit-timestamps":  {version: 2, rows: 2, files: 2, tombstones: 0},

	"deltars-partitioned-checkpoint": {version: 2, rows: 5, files: 4, tombstones: 2},
}

func TestGoldenTables(t *testing.T) {
	entries, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatalf("golden tables missing (make golden writes testdata/delta-golden): %v", err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	for _, name := range dirs {
		if _, ok := goldenTables[name]; !ok {
			t.Errorf("no expectation for golden table %s: add it to goldenTables", name)
		}
	}
	// Every expected table must be on disk: openGolden fails the subtest
	// of a missing one.
	for _, name := range slices.Sorted(maps.Keys(goldenTables)) {
		want := goldenTables[name]
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			s, err := Load(ctx, deltagolden.Open(t, name))
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
		s, err := LoadVersion(ctx, deltagolden.Open(t, name), version)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("tombstones are the overwritten and rewritten files", func(t *testing.T) {
		s := load(t, "basic-append-overwrite", -1)
		v0, v2 := load(t, "basic-append-overwrite", 0), load(t, "basic-append-overwrite", 2)
		want := filePaths(v0)
		for _, p := range filePaths(v2) {
			if !slices.Contains(filePaths(s), p) && !slices.Contains(want, p) {
				want = append(want, p)
			}
		}
		var got []string
		for _, ts := range s.Tombstones() {
			if ts.DeletionTimestamp == nil || *ts.DeletionTimestamp <= 0 {
				t.Errorf("tombstone %s without deletionTimestamp", ts.Path)
			}
			got = append(got, ts.Path)
		}
		slices.Sort(got)
		slices.Sort(want)
		if len(want) != 2 || !slices.Equal(got, want) {
			t.Fatalf("tombstones %v, want the v0 file and the v2 file DELETE rewrote: %v", got, want)
		}
		if v0.NumFiles() != 1 || v2.NumFiles() != 3 {
			t.Errorf("v0 has %d files, v2 %d; want 1 and 3", v0.NumFiles(), v2.NumFiles())
		}
		for _, a := range s.Files() {
			st, err := ParseStats(a.Stats)
			if err != nil {
				t.Fatal(err)
			}
			if n, ok := st.Nulls("id"); !ok || n != 0 {
				t.Errorf("%s nullCount.id = %d, %v", a.Path, n, ok)
			}
		}
	})
	t.Run("time travel ignores .tmp", func(t *testing.T) {
		_, err := LoadVersion(ctx, deltagolden.Open(t, "basic-append-overwrite"), 4)
		if !errors.Is(err, writers.ErrNotFound) {
			t.Fatalf("version 4 (only in .tmp/) = %v, want ErrNotFound", err)
		}
	})
	t.Run("incremental update across a checkpoint", func(t *testing.T) {
		b := deltagolden.Open(t, "checkpoint-classic")
		v0 := load(t, "checkpoint-classic", 0)
		latest := load(t, "checkpoint-classic", -1)
		updated, err := v0.Update(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if updated.Version != 13 || !slices.Equal(filePaths(updated), filePaths(latest)) {
			t.Fatalf("updated v%d %v, latest %v", updated.Version, filePaths(updated), filePaths(latest))
		}
		if v0.Version != 0 {
			t.Fatalf("Update modified its receiver")
		}
	})
	t.Run("deletion vector key", func(t *testing.T) {
		s := load(t, "dv-same-file", -1)
		f := s.Files()
		if len(f) != 1 || f[0].DeletionVector == nil || f[0].DeletionVector.Cardinality != 3 {
			t.Fatalf("files %+v", f)
		}
	})
}

package deltalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"

	"github.com/quiver-ingest/quiver/internal/reftool"
	"github.com/quiver-ingest/quiver/writers/storage/storagetest"
)

func ptr[T any](v T) *T { return &v }

// checkpointCases are table states written to classic checkpoints and
// read back: in is what the snapshot holds, want what a checkpoint of it
// reads back as (in, but with the absent maps and lists Metadata always
// writes present and empty, a remove's stats and tags dropped, and an
// extendedFileMetadata remove's partitionValues present).
func checkpointCases() map[string]struct{ in, want []Action } {
	const schema = `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}`
	full := []Action{
		{Protocol: &Protocol{MinReaderVersion: 3, MinWriterVersion: 7,
			ReaderFeatures: []string{"deletionVectors", "columnMapping"},
			WriterFeatures: []string{"deletionVectors", "columnMapping", "domainMetadata", "rowTracking"}}},
		{MetaData: &Metadata{ID: "id-1", Name: ptr("t"), Description: ptr("a table"),
			Format:           Format{Provider: "parquet", Options: map[string]string{"k": "v", "a": ""}},
			SchemaString:     schema,
			PartitionColumns: []string{"day", "region"},
			Configuration:    map[string]string{"delta.enableDeletionVectors": "true", "delta.checkpointInterval": "3"},
			CreatedTime:      ptr(int64(1700000000000))}},
		{Txn: &Txn{AppID: "writer-a", Version: 7, LastUpdated: ptr(int64(1700000000001))}},
		{DomainMetadata: &DomainMetadata{Domain: "delta.rowTracking", Configuration: `{"rowIdHighWaterMark":9}`}},
		{Add: &Add{Path: "day=2024-01-01/region=eu/a.parquet",
			PartitionValues: map[string]*string{"day": ptr("2024-01-01"), "region": nil},
			Size:            100, ModificationTime: 1700000000002, DataChange: true,
			Stats: `{"numRecords":10}`,
			Tags:  map[string]string{"INSERTION_TIME": "1700000000002", "x": ""},
			DeletionVector: &DeletionVector{StorageType: "u", PathOrInlineDv: "ab^-aqEH.-t@S}K{vb[*k^",
				Offset: ptr(int32(1)), SizeInBytes: 36, Cardinality: 2, MaxRowIndex: ptr(int64(9))},
			BaseRowID: ptr(int64(0)), DefaultRowCommitVersion: ptr(int64(1))}},
		{Remove: &Remove{Path: "day=2024-01-02/region=us/b.parquet",
			DeletionTimestamp: ptr(int64(1700000000003)), DataChange: true, ExtendedFileMetadata: true,
			PartitionValues: map[string]*string{"day": ptr("2024-01-02"), "region": ptr("us")},
			Size:            ptr(int64(50)),
			Stats:           `{"numRecords":5}`, Tags: map[string]string{"t": "1"},
			DeletionVector: &DeletionVector{StorageType: "i", PathOrInlineDv: "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
				Offset: ptr(int32(0)), SizeInBytes: 40, Cardinality: 1, MaxRowIndex: ptr(int64(4))},
			BaseRowID: ptr(int64(10)), DefaultRowCommitVersion: ptr(int64(2))}},
	}
	fullWant := append([]Action(nil), full...)
	rm := *full[5].Remove
	rm.Stats, rm.Tags = "", nil
	fullWant[5] = Action{Remove: &rm}

	unset := []Action{
		{Protocol: &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}},
		{MetaData: &Metadata{ID: "id-2", Format: Format{Provider: "parquet"}, SchemaString: schema}},
		{Txn: &Txn{AppID: "writer-b"}},
		{DomainMetadata: &DomainMetadata{Domain: "app"}},
		{Add: &Add{Path: "a.parquet", PartitionValues: map[string]*string{}}},
		{Add: &Add{Path: "b.parquet", Tags: map[string]string{},
			DeletionVector: &DeletionVector{StorageType: "p", PathOrInlineDv: "s3://b/dv.bin", SizeInBytes: 1}}},
		{Remove: &Remove{Path: "c.parquet"}},
		{Remove: &Remove{Path: "d.parquet", ExtendedFileMetadata: true}},
	}
	unsetWant := append([]Action(nil), unset...)
	unsetWant[1] = Action{MetaData: &Metadata{ID: "id-2", SchemaString: schema,
		Format:           Format{Provider: "parquet", Options: map[string]string{}},
		PartitionColumns: []string{}, Configuration: map[string]string{}}}
	unsetWant[5] = Action{Add: &Add{Path: "b.parquet", PartitionValues: map[string]*string{}, Tags: map[string]string{},
		DeletionVector: unset[5].Add.DeletionVector}}
	unsetWant[7] = Action{Remove: &Remove{Path: "d.parquet", ExtendedFileMetadata: true, PartitionValues: map[string]*string{}}}
	return map[string]struct{ in, want []Action }{
		"every field": {full, fullWant},
		"unset":       {unset, unsetWant},
	}
}

// A classic checkpoint (written from Arrow by parquetio) holds every field
// of every action kind it carries, set or not, and Load reads the same
// state back; pyarrow, checking page checksums, reads it too.
func TestCheckpointRoundTrip(t *testing.T) {
	now := time.UnixMilli(1700000000010)
	for name, c := range checkpointCases() {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			store := storagetest.Open(t, "file://"+dir)
			s := newSnapshot()
			s.apply(5, c.in)
			if err := WriteCheckpoint(ctx, store, s, now); err != nil {
				t.Fatal(err)
			}
			got, err := Load(ctx, store)
			if err != nil {
				t.Fatal(err)
			}
			want := newSnapshot()
			want.apply(5, c.want)
			for _, part := range []struct {
				what      string
				got, want any
			}{
				{"version", got.Version, want.Version},
				{"protocol", got.Protocol, want.Protocol},
				{"metaData", got.Metadata, want.Metadata},
				{"txns", got.Txns(), want.Txns()},
				{"domainMetadata", got.Domains(), want.Domains()},
				{"adds", got.Files(), want.Files()},
				{"removes", got.Tombstones(), want.Tombstones()},
			} {
				if !reflect.DeepEqual(part.got, part.want) {
					g, _ := json.Marshal(part.got)
					w, _ := json.Marshal(part.want)
					t.Errorf("%s read back as\n%s\nwant\n%s", part.what, g, w)
				}
			}

			py := readWithPyarrow(t, filepath.Join(dir, filepath.FromSlash(CheckpointKey(5))))
			if n := len(checkpointActions(s, now)); py.Rows != n {
				t.Errorf("pyarrow reads %d rows, want %d", py.Rows, n)
			}
			if want := cpRowColumns(); !reflect.DeepEqual(py.Columns, want) {
				t.Errorf("pyarrow reads columns\n%v\nwant\n%v", py.Columns, want)
			}
			var paths []string
			for _, a := range want.Files() {
				paths = append(paths, a.Path)
			}
			if !reflect.DeepEqual(py.AddPaths, paths) {
				t.Errorf("pyarrow reads add paths %v, want %v", py.AddPaths, paths)
			}
		})
	}
}

// A classic checkpoint has the Parquet schema of cpRow, the reader's row
// type (the schema the checkpoints of parquet-go's row writer had): the
// same columns, physical and logical types and repetitions. Encoding it
// releases all its Arrow memory.
func TestCheckpointSchema(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	data, err := encodeClassicCheckpoint(mem, checkpointCases()["every field"].in)
	if err != nil {
		t.Fatal(err)
	}
	mem.AssertSize(t, 0)
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	// The root's name is not part of the schema readers match.
	body := func(s *parquet.Schema) string {
		str := s.String()
		return str[strings.Index(str, "{"):]
	}
	if got, want := body(f.Schema()), body(parquet.SchemaOf(new(cpRow))); got != want {
		t.Errorf("checkpoint schema\n%s\nwant (cpRow)\n%s", got, want)
	}
}

// cpRowColumns lists the leaf column paths of cpRow, dot-separated.
func cpRowColumns() []string {
	var out []string
	for _, p := range parquet.SchemaOf(new(cpRow)).Columns() {
		out = append(out, strings.Join(p, "."))
	}
	return out
}

// pyarrowRead is what pyarrow reads of a checkpoint.
type pyarrowRead struct {
	Rows     int      `json:"rows"`
	Columns  []string `json:"columns"`   // the Parquet leaf column paths
	AddPaths []string `json:"add_paths"` // add.path of the add rows
}

// readWithPyarrow reads the Parquet file at path with pyarrow from the
// project's .venv (make venv), verifying page checksums.
func readWithPyarrow(t *testing.T, path string) pyarrowRead {
	t.Helper()
	python := reftool.Python(t, "pyarrow.parquet")
	const script = `
import json, sys
import pyarrow.parquet as pq
t = pq.read_table(sys.argv[1], page_checksum_verification=True)
print(json.dumps({
    "rows": t.num_rows,
    "columns": [c.path for c in pq.ParquetFile(sys.argv[1]).schema],
    "add_paths": [a["path"] for a in t.column("add").to_pylist() if a is not None],
}))
`
	var stderr bytes.Buffer
	cmd := exec.Command(python, "-c", script, path)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pyarrow (a stale .venv? make venv): %v\n%s", err, stderr.String())
	}
	var r pyarrowRead
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("pyarrow answered %q: %v", out, err)
	}
	return r
}

// TestCheckpointManyBatches: a checkpoint of more actions than one Arrow
// record holds (checkpointBatchRows) is written batch by batch and reads
// back whole and in order.
func TestCheckpointManyBatches(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	actions := []Action{{Protocol: &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}}}
	n := 2*checkpointBatchRows + 7
	for i := range n {
		actions = append(actions, Action{Add: &Add{Path: fmt.Sprintf("part-%06d.parquet", i), Size: int64(i), DataChange: true,
			Stats: fmt.Sprintf(`{"numRecords":%d}`, i), PartitionValues: map[string]*string{}}})
	}
	data, err := encodeClassicCheckpoint(mem, actions)
	if err != nil {
		t.Fatal(err)
	}
	mem.AssertSize(t, 0)
	store := storagetest.Open(t, "file://"+t.TempDir())
	if err := store.Put(t.Context(), "cp.checkpoint.parquet", data); err != nil {
		t.Fatal(err)
	}
	cf, err := readCheckpointFile(t.Context(), store, "cp.checkpoint.parquet", maxLogObjectBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.actions) != len(actions) {
		t.Fatalf("read %d actions, wrote %d", len(cf.actions), len(actions))
	}
	for i, a := range cf.actions[1:] {
		if a.Add == nil || a.Add.Path != actions[i+1].Add.Path || a.Add.Stats != actions[i+1].Add.Stats {
			t.Fatalf("action %d: %+v, want add %s", i+1, a, actions[i+1].Add.Path)
		}
	}
}

package delta

import (
	"errors"
	"fmt"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
)

func TestDescriptorRoundTrip(t *testing.T) {
	v := "2026-01-01"
	d := descriptor{
		Schema:           `{"type":"struct","fields":[]}`,
		PartitionColumns: []string{"day"},
		Adds: []addFile{{
			Path: "day=2026-01-01/part-00000-x-c000.zstd.parquet", PartitionValues: map[string]*string{"day": &v},
			Size: 10, ModificationTime: 1, DataChange: true, Stats: `{"numRecords":3}`, Rows: 3,
		}},
	}
	b, err := d.encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeDescriptor(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Adds[0].Path != d.Adds[0].Path || *got.Adds[0].PartitionValues["day"] != v || got.Adds[0].Rows != 3 || got.Schema != d.Schema {
		t.Fatalf("round trip changed the descriptor: %+v", got)
	}
}

// TestUpsertDescriptorRoundTrip: an upsert descriptor is version 2 and
// keeps its read version, read set and removes; an append's stays 1.
func TestUpsertDescriptorRoundTrip(t *testing.T) {
	d := descriptor{Adds: []addFile{}, Upsert: &upsertPlan{ReadVersion: 4, ReadFiles: []string{"a.parquet", "b.parquet"}, Removes: []string{"a.parquet"}}}
	b, err := d.encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeDescriptor(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != upsertDescriptorVersion || got.Upsert.ReadVersion != 4 || len(got.Upsert.ReadFiles) != 2 || got.Upsert.Removes[0] != "a.parquet" {
		t.Fatalf("round trip changed the descriptor: %s -> %+v", b, got.Upsert)
	}
	plain := descriptor{Adds: []addFile{}}
	if b, err = plain.encode(); err != nil {
		t.Fatal(err)
	}
	if got, err = decodeDescriptor(b); err != nil || got.Version != descriptorVersion {
		t.Fatalf("append descriptor %s: version %d, %v", b, got.Version, err)
	}
}

func TestDescriptorRefused(t *testing.T) {
	for _, tc := range []struct{ name, json string }{
		{"not-json", `nope`},
		{"discard", `{"rows":3,"bytes":10,"batches":1}`},
		{"kind", `{"kind":"lance","version":1,"schema":"","partitionColumns":[],"adds":[]}`},
		{"version", `{"kind":"delta","version":2,"schema":"","partitionColumns":[],"adds":[]}`},
		{"trailing", `{"kind":"delta","version":1,"schema":"","partitionColumns":[],"adds":[]} {}`},
		{"no-schema", `{"kind":"delta","version":1,"schema":"","adds":[{"path":"a.parquet"}]}`},
		{"absolute", `{"kind":"delta","version":1,"schema":"s","adds":[{"path":"/etc/passwd"}]}`},
		{"uri", `{"kind":"delta","version":1,"schema":"s","adds":[{"path":"s3://other/x.parquet"}]}`},
		{"dotdot", `{"kind":"delta","version":1,"schema":"s","adds":[{"path":"../x.parquet"}]}`},
		{"encoded-dotdot", `{"kind":"delta","version":1,"schema":"s","adds":[{"path":"%2E%2E/x.parquet"}]}`},
		{"log", `{"kind":"delta","version":1,"schema":"s","adds":[{"path":"_delta_log/00000000000000000001.json"}]}`},
		{"negative", `{"kind":"delta","version":1,"schema":"s","adds":[{"path":"a.parquet","size":-1}]}`},
		{"stats-rows", `{"kind":"delta","version":1,"schema":"s","adds":[{"path":"a.parquet","size":1,"rows":10,"stats":"{\"numRecords\":1}"}]}`},
		{"stats-no-numrecords", `{"kind":"delta","version":1,"schema":"s","adds":[{"path":"a.parquet","size":1,"rows":10,"stats":"{\"minValues\":{}}"}]}`},
		{"upsert-v1", `{"kind":"delta","version":1,"schema":"","adds":[],"upsert":{"readVersion":1,"readFiles":[],"removes":[]}}`},
		{"upsert-remove-path", `{"kind":"delta","version":2,"schema":"","adds":[],"upsert":{"readVersion":1,"readFiles":[],"removes":["../x.parquet"]}}`},
		{"upsert-read-path", `{"kind":"delta","version":2,"schema":"","adds":[],"upsert":{"readVersion":1,"readFiles":["_delta_log/x"],"removes":[]}}`},
		{"upsert-read-version", `{"kind":"delta","version":2,"schema":"","adds":[],"upsert":{"readVersion":-2,"readFiles":[],"removes":[]}}`},
		// -1 means "no table": such a plan read no file and removes none.
		{"upsert-no-table-removes", `{"kind":"delta","version":2,"schema":"","adds":[],"upsert":{"readVersion":-1,"readFiles":["a.parquet"],"removes":["a.parquet"]}}`},
		{"empty-segment", `{"kind":"delta","version":1,"schema":"s","adds":[{"path":"a//x.parquet"}]}`},
		{"dot-segment", `{"kind":"delta","version":1,"schema":"s","adds":[{"path":"./x.parquet"}]}`},
		{"file-uri", `{"kind":"delta","version":1,"schema":"s","adds":[{"path":"file:///etc/passwd"}]}`},
		{"encoded-slash-escape", `{"kind":"delta","version":1,"schema":"s","adds":[{"path":"a%2F..%2F..%2Fx.parquet"}]}`},
		{"upsert-remove-unread", `{"kind":"delta","version":2,"schema":"","adds":[],"upsert":{"readVersion":1,"readFiles":["a.parquet"],"removes":["b.parquet"]}}`},
		{"upsert-remove-twice", `{"kind":"delta","version":2,"schema":"","adds":[],"upsert":{"readVersion":1,"readFiles":["a.parquet"],"removes":["a.parquet","a.parquet"]}}`},
		{"upsert-dv-unread", `{"kind":"delta","version":2,"schema":"","adds":[],"upsert":{"readVersion":1,"readFiles":[],"removes":[],"readDVs":{"a.parquet":"u1"}}}`},
		{"upsert-dv-file-size", `{"kind":"delta","version":2,"schema":"","adds":[],"upsert":{"readVersion":1,"readFiles":["a.parquet"],"removes":[],"updates":[{"path":"a.parquet","deletionVector":{"storageType":"u","pathOrInlineDv":"D9<kHR+Y$VI==cD-=c}=","offset":1,"sizeInBytes":34,"cardinality":1},"rows":50}],"dvFile":"deletion_vector_79b4a05c-a74f-4bf6-8b58-925bc6708e27.bin"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeDescriptor(writers.Descriptor(tc.json)); !errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("decode %s: %v, want ErrInvalid", tc.json, err)
			}
		})
	}
}

// FuzzDecodeDescriptor: decoding never panics, and whatever decodes has
// only clean relative paths and encodes back to something that decodes.
func FuzzDecodeDescriptor(f *testing.F) {
	f.Add(`{"kind":"delta","version":1,"schema":"s","partitionColumns":["d"],"adds":[{"path":"d=1/a.parquet","partitionValues":{"d":"1"},"size":3,"rows":1}]}`)
	f.Add(`{"kind":"delta","version":1,"schema":"","partitionColumns":[],"adds":[]}`)
	f.Add(`{"kind":"delta","version":1,"schema":"s","adds":[{"path":"a%252Fb/c.parquet"}]}`)
	for _, p := range escapingPaths {
		f.Add(fmt.Sprintf(`{"kind":"delta","version":1,"schema":"s","adds":[{"path":%q}]}`, p))
		f.Add(fmt.Sprintf(`{"kind":"delta","version":2,"schema":"","adds":[],"upsert":{"readVersion":1,"readFiles":[%q],"removes":[%[1]q]}}`, p))
	}
	f.Fuzz(func(t *testing.T, in string) {
		d, err := decodeDescriptor(writers.Descriptor(in))
		if err != nil {
			if !errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		for _, a := range d.Adds {
			if err := checkAddPath(a.Path); err != nil {
				t.Fatalf("accepted path %q: %v", a.Path, err)
			}
		}
		b, err := d.encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeDescriptor(b); err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
	})
}

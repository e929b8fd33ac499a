package kafka

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
)

// descKey is the key the hostile descriptors are committed under.
var descKey = writers.TxnKey{Writer: "job", Epoch: 1}

// hostileDescriptors name files a descriptor must not reach: absolute
// and relative paths, names outside the staging pattern, another key's
// staging file, and a file without records (Commit would only remove it).
var hostileDescriptors = map[string]string{
	"legacy absolute path":      `{"endpoint":"ep","path":"/any/file","records":0}`,
	"legacy path with records":  `{"endpoint":"ep","path":"/any/file","records":1}`,
	"legacy path escaping":      `{"endpoint":"ep","path":"/data/kafka/ep/../../victim","records":1}`,
	"legacy path of other name": `{"endpoint":"ep","path":"/data/kafka/ep/victim","records":1}`,
	"absolute file":             `{"endpoint":"ep","file":"/any/file","records":1}`,
	"dotdot file":               `{"endpoint":"ep","file":"../../victim","records":1}`,
	"dotdot inside file":        `{"endpoint":"ep","file":"txn-x/../victim","records":1}`,
	"dot":                       `{"endpoint":"ep","file":".","records":1}`,
	"name outside pattern":      `{"endpoint":"ep","file":"victim","records":1}`,
	"other key's file":          `{"endpoint":"ep","file":"` + stageName(writers.TxnKey{Writer: "other", Epoch: 1}) + `.stage","records":1}`,
	"other epoch's file":        `{"endpoint":"ep","file":"` + stageName(writers.TxnKey{Writer: "job", Epoch: 2}) + `.stage","records":1}`,
	"open file":                 `{"endpoint":"ep","file":"` + stageName(descKey) + `.open","records":1}`,
	"own file without records":  `{"endpoint":"ep","file":"` + stageName(descKey) + `.stage","records":0}`,
	"records without file":      `{"endpoint":"ep","records":3}`,
	"file and path":             `{"endpoint":"ep","file":"` + stageName(descKey) + `.stage","path":"/data/kafka/ep/` + stageName(descKey) + `.stage","records":1}`,
	"other endpoint":            `{"endpoint":"other","file":"` + stageName(descKey) + `.stage","records":1}`,
}

func descWriter() *Writer {
	return &Writer{env: writers.Env{Endpoint: "ep"}, dir: filepath.Join("/data", "kafka", "ep")}
}

func TestHostileDescriptorsRefused(t *testing.T) {
	w := descWriter()
	for name, js := range hostileDescriptors {
		t.Run(name, func(t *testing.T) {
			if d, err := w.decodeDescriptor(descKey, 0, writers.Descriptor(js)); !errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("decode %s: path %q, err %v; want ErrInvalid", js, d.path, err)
			}
		})
	}
}

func TestDescriptorResolvesOwnFile(t *testing.T) {
	w := descWriter()
	want := filepath.Join(w.dir, stageName(descKey)+stageSuffix)
	for name, js := range map[string]string{
		"file":        `{"endpoint":"ep","file":"` + stageName(descKey) + `.stage","size":9,"records":1}`,
		"legacy path": `{"endpoint":"ep","path":"` + want + `","size":9,"records":1}`,
	} {
		t.Run(name, func(t *testing.T) {
			d, err := w.decodeDescriptor(descKey, 0, writers.Descriptor(js))
			if err != nil || d.path != want {
				t.Fatalf("decode %s: path %q, %v; want %q", js, d.path, err, want)
			}
		})
	}
	d, err := w.decodeDescriptor(descKey, 0, writers.Descriptor(`{"endpoint":"ep","records":0,"produced":5}`))
	if err != nil || d.path != "" {
		t.Fatalf("descriptor without a file: path %q, %v", d.path, err)
	}
}

// FuzzDecodeDescriptor: whatever a descriptor says, it resolves to no file
// or to the key's own staging file.
func FuzzDecodeDescriptor(f *testing.F) {
	for _, js := range hostileDescriptors {
		f.Add(js)
	}
	f.Add(`{"endpoint":"ep","file":"` + stageName(descKey) + `.stage","records":1}`)
	w := descWriter()
	own := filepath.Join(w.dir, stageName(descKey)+stageSuffix)
	f.Fuzz(func(t *testing.T, js string) {
		d, err := w.decodeDescriptor(descKey, 0, writers.Descriptor(js))
		if err != nil {
			if !errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if d.path != "" && d.path != own {
			t.Fatalf("%s resolved to %q, want %q or nothing", js, d.path, own)
		}
	})
}

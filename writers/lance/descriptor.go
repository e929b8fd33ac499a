package lance

import (
	"bytes"
	"encoding/json"
	"path"
	"strings"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lanceformat"
)

const (
	descriptorKind    = "lance"
	descriptorVersion = 1
)

// descriptor is what Precommit returns and Commit publishes: the Lance
// schema the data files were written with (nil when the key staged
// nothing and no schema was known) and the new fragments (ids unassigned).
// It is self-contained, so a restarted or another server can commit it.
type descriptor struct {
	Kind      string              `json:"kind"`
	Version   int                 `json:"version"`
	Schema    *lanceformat.Schema `json:"schema,omitempty"`
	Fragments []fragment          `json:"fragments"`
}

// fragment is one new fragment: one data file under data/.
type fragment struct {
	Path    string  `json:"path"`
	Fields  []int32 `json:"fields"`
	Columns []int32 `json:"columns"`
	Size    uint64  `json:"size"`
	Rows    uint64  `json:"rows"`
}

func (f fragment) lance() lanceformat.Fragment {
	return lanceformat.Fragment{
		Files: []lanceformat.DataFile{{Path: f.Path, Fields: f.Fields, ColumnIndices: f.Columns,
			Major: 2, Minor: 0, SizeBytes: f.Size}},
		PhysicalRows: f.Rows,
	}
}

func (d *descriptor) encode() (writers.Descriptor, error) {
	d.Kind, d.Version = descriptorKind, descriptorVersion
	if d.Fragments == nil {
		d.Fragments = []fragment{}
	}
	return json.Marshal(d)
}

// decodeDescriptor parses and checks one descriptor; anything else, or a
// file path outside data/, is ErrInvalid.
func decodeDescriptor(b writers.Descriptor) (*descriptor, error) {
	var d descriptor
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil || dec.More() {
		return nil, writers.Errorf(writers.ErrInvalid, "lance: descriptor is not a Lance sink descriptor: hand over only descriptors precommitted by a lance endpoint")
	}
	if d.Kind != descriptorKind || d.Version != descriptorVersion {
		return nil, writers.Errorf(writers.ErrInvalid, "lance: descriptor kind %q version %d is not %q version %d: hand over only descriptors of a lance endpoint of this Quiver version", d.Kind, d.Version, descriptorKind, descriptorVersion)
	}
	if len(d.Fragments) > 0 && d.Schema == nil {
		return nil, writers.Errorf(writers.ErrInvalid, "lance: descriptor has fragments but no schema")
	}
	for _, f := range d.Fragments {
		if f.Path == "" || path.Clean(f.Path) != f.Path || strings.Contains(f.Path, "/") || len(f.Fields) != len(f.Columns) {
			return nil, writers.Errorf(writers.ErrInvalid, "lance: descriptor data file %q is not a plain file name under data/", f.Path)
		}
	}
	return &d, nil
}

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
// A merge_insert descriptor also carries Merge.
type descriptor struct {
	Kind      string              `json:"kind"`
	Version   int                 `json:"version"`
	Schema    *lanceformat.Schema `json:"schema,omitempty"`
	Fragments []fragment          `json:"fragments"`
	Merge     *mergeDesc          `json:"merge,omitempty"`
}

// mergeDesc is the part of a merge_insert descriptor that changes existing
// fragments, planned on dataset version ReadVersion (0: no dataset).
type mergeDesc struct {
	ReadVersion uint64            `json:"read_version"`
	Updated     []updatedFragment `json:"updated"`
	Removed     []touchedFragment `json:"removed"`
	Counts      mergeCounts       `json:"counts"`
}

// touchedFragment identifies an existing fragment as the plan saw it:
// Commit refuses to publish when it changed since (another deletion file,
// other data files, or gone).
type touchedFragment struct {
	ID       uint64                    `json:"id"`
	Files    []string                  `json:"files"`
	Deletion *lanceformat.DeletionFile `json:"deletion,omitempty"`
}

// updatedFragment is a touched fragment and its new deletion file (the old
// deleted offsets and the merge's).
type updatedFragment struct {
	touchedFragment
	NewDeletion lanceformat.DeletionFile `json:"new_deletion"`
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
	if d.Merge != nil && d.Merge.ReadVersion == 0 && (len(d.Merge.Updated) > 0 || len(d.Merge.Removed) > 0) {
		return nil, writers.Errorf(writers.ErrInvalid, "lance: merge descriptor changes fragments of a dataset it says did not exist")
	}
	for _, f := range d.Fragments {
		if f.Path == "" || path.Clean(f.Path) != f.Path || strings.Contains(f.Path, "/") || len(f.Fields) != len(f.Columns) {
			return nil, writers.Errorf(writers.ErrInvalid, "lance: descriptor data file %q is not a plain file name under data/", f.Path)
		}
	}
	return &d, nil
}

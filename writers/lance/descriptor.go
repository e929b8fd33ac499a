package lance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/storage"
	"github.com/quiver-ingest/quiver/writers/tablesink"
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
	Kind      string            `json:"kind"`
	Version   int               `json:"version"`
	Schema    *lancefile.Schema `json:"schema,omitempty"`
	Fragments []fragment        `json:"fragments"`
	Merge     *mergeDesc        `json:"merge,omitempty"`
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
	ID       uint64                   `json:"id"`
	Files    []string                 `json:"files"`
	Deletion *lancetable.DeletionFile `json:"deletion,omitempty"`
}

// updatedFragment is a touched fragment and its new deletion file (the old
// deleted offsets and the merge's) with its exact size.
type updatedFragment struct {
	touchedFragment
	NewDeletion     lancetable.DeletionFile `json:"new_deletion"`
	NewDeletionSize int64                   `json:"new_deletion_size"`
}

// fragment is one new fragment: one data file under data/.
type fragment struct {
	Path    string  `json:"path"`
	Fields  []int32 `json:"fields"`
	Columns []int32 `json:"columns"`
	Size    uint64  `json:"size"`
	Rows    uint64  `json:"rows"`
	// Minor is the data file's format 2.minor (absent: 2.0, descriptors
	// of builds before 2.1 support).
	Minor uint16 `json:"minor,omitempty"`
}

func (f fragment) lance() lancetable.Fragment {
	return lancetable.Fragment{
		Files: []lancetable.DataFile{{Path: f.Path, Fields: f.Fields, ColumnIndices: f.Columns,
			Major: 2, Minor: uint32(f.Minor), SizeBytes: f.Size}},
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

// decodeDescriptor parses and checks one descriptor; anything else, a
// data file that is not a plain name under data/ (storage.CheckKey) or a
// new deletion file without its size, is ErrInvalid. A descriptor is
// client input: Commit also checks that every file it names exists with
// its stated size (verifyFiles).
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
	if d.Schema != nil {
		// The schema of the dataset a first commit creates.
		as, err := d.Schema.ToArrow()
		if err != nil {
			return nil, writers.Errorf(writers.ErrInvalid, "lance: descriptor schema: %w", err)
		}
		if err := checkNames(as); err != nil {
			return nil, fmt.Errorf("%w (descriptor schema)", err)
		}
	}
	if d.Merge != nil && d.Merge.ReadVersion == 0 && (len(d.Merge.Updated) > 0 || len(d.Merge.Removed) > 0) {
		return nil, writers.Errorf(writers.ErrInvalid, "lance: merge descriptor changes fragments of a dataset it says did not exist")
	}
	for _, f := range d.Fragments {
		if strings.Contains(f.Path, "/") || storage.CheckKey(lancetable.DataKey(f.Path)) != nil || len(f.Fields) != len(f.Columns) {
			return nil, writers.Errorf(writers.ErrInvalid, "lance: descriptor data file %q is not a plain file name under data/", f.Path)
		}
	}
	if d.Merge != nil {
		for _, u := range d.Merge.Updated {
			if u.NewDeletionSize <= 0 {
				return nil, writers.Errorf(writers.ErrInvalid, "lance: merge descriptor does not state the size of fragment %d's new deletion file (precommitted by an earlier Quiver build?): roll back and replay the transaction", u.ID)
			}
		}
	}
	return &d, nil
}

// checkModes refuses descriptors the endpoint's mode cannot have
// precommitted: a merge outside merge_insert (it would drop or re-mark
// fragments an append never read) and, in merge_insert, fragments without
// the merge that wrote them (blind appends could duplicate keys).
func (w *Writer) checkModes(ds []*descriptor) error {
	m := tablesink.Modes{Sink: "lance", Endpoint: w.env.Endpoint, Mode: w.cfg.WriteMode, PlanMode: ModeMergeInsert, Plan: "a merge", Files: "fragments"}
	return m.Check(len(ds), func(i int) (bool, bool) { return ds[i].Merge != nil, len(ds[i].Fragments) > 0 })
}

// verifyFiles checks that every data file and new deletion file ds name
// exists under the dataset root with its stated size: a manifest naming a
// missing or different file leaves the dataset unreadable. It costs one
// stat per file (storage.CheckObjects runs them 16 at a time).
func (w *Writer) verifyFiles(ctx context.Context, ds []*descriptor) error {
	var want []storage.Expected
	for i, d := range ds {
		want = append(want, d.written(fmt.Sprintf("lance: endpoint %q: descriptor %d", w.env.Endpoint, i))...)
	}
	return w.bucket.CheckObjects(ctx, want)
}

// written lists the objects d's precommit wrote: the new fragments' data
// files and a merge's new deletion files (never the existing fragments'
// files it rewrites or drops).
func (d *descriptor) written(label string) []storage.Expected {
	var out []storage.Expected
	for _, f := range d.Fragments {
		out = append(out, storage.Expected{Key: lancetable.DataKey(f.Path), Size: int64(f.Size), Label: label})
	}
	if d.Merge != nil {
		for _, u := range d.Merge.Updated {
			out = append(out, storage.Expected{Key: u.NewDeletion.Path(u.ID), Size: u.NewDeletionSize, Label: label})
		}
	}
	return out
}

// writtenFiles is written of an encoded descriptor (tablesink.Discards).
func writtenFiles(b writers.Descriptor) ([]storage.Expected, error) {
	d, err := decodeDescriptor(b)
	if err != nil {
		return nil, err
	}
	return d.written("lance: discarded precommit"), nil
}

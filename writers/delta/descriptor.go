package delta

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// descriptorKind and the versions identify a Delta sink descriptor.
// Version 1 (append, overwrite) has no upsert member; version 2 is an
// upsert's. Both decode, so descriptors of earlier builds stay valid.
const (
	descriptorKind          = "delta"
	descriptorVersion       = 1
	upsertDescriptorVersion = 2
)

// descriptor is what Precommit returns and Commit publishes: the Delta add
// actions of data files already written (durable, not yet in the log) and
// the Delta schema they were written with. It is self-contained, so a
// restarted server or another server writing the same table can commit it.
// JSON layout (docs/delta.md, "Descriptors"):
//
//	{"kind":"delta","version":1,
//	 "schema":"<Delta schemaString the files follow, \"\" when no rows>",
//	 "partitionColumns":["day"],
//	 "adds":[{"path":"day=2026-01-01/part-….parquet","partitionValues":{"day":"2026-01-01"},
//	          "size":1234,"modificationTime":1764700000000,"dataChange":true,"stats":"{…}"}]}
//
// An upsert's descriptor is version 2 and adds
//
//	"upsert":{"readVersion":7,"readFiles":["part-….parquet"],"removes":["part-….parquet"]}
//
// and, in a table with deletion vectors, the deletion vector each read file
// had (by path, absent when none), the files that get a new deletion vector
// instead of a rewrite, and the deletion-vector file holding them:
//
//	"readDVs":{"part-a.parquet":"u…@1"},
//	"updates":[{"path":"part-a.parquet","deletionVector":{"storageType":"u",…},"rows":1000}],
//	"dvFile":"deletion_vector_….bin"
type descriptor struct {
	Kind             string      `json:"kind"`
	Version          int         `json:"version"`
	Schema           string      `json:"schema"`
	PartitionColumns []string    `json:"partitionColumns"`
	Adds             []addFile   `json:"adds"`
	Upsert           *upsertPlan `json:"upsert,omitempty"`
}

// upsertPlan is what an upsert's commit needs besides its adds: the table
// version it was planned against, the files whose keys it read (its read
// set for conflict checks) and the files it rewrote, which the commit
// removes. Paths are add paths as logged.
type upsertPlan struct {
	ReadVersion int64             `json:"readVersion"`
	ReadFiles   []string          `json:"readFiles"`
	Removes     []string          `json:"removes"`
	ReadDVs     map[string]string `json:"readDVs,omitempty"`
	Updates     []dvUpdate        `json:"updates,omitempty"`
	DVFile      string            `json:"dvFile,omitempty"`
}

// dvUpdate replaces the deletion vector of the live file at Path (the one
// the plan read, readDVs) by DeletionVector, which marks the rows the
// old one did and the rows the upsert replaced or deleted.
type dvUpdate struct {
	Path           string                   `json:"path"`
	DeletionVector *deltalog.DeletionVector `json:"deletionVector"`
	// Rows is the file's physical row count, for stats that lack it.
	Rows int64 `json:"rows"`
}

// addFile is the content of one Delta add action, as delta-protocol.md §2
// spells it. Path is relative to the table root and URI-encoded.
type addFile struct {
	Path             string             `json:"path"`
	PartitionValues  map[string]*string `json:"partitionValues"`
	Size             int64              `json:"size"`
	ModificationTime int64              `json:"modificationTime"`
	DataChange       bool               `json:"dataChange"`
	Stats            string             `json:"stats,omitempty"`
	// Rows is numRecords, kept apart from Stats so that counting needs no
	// second JSON decode.
	Rows int64 `json:"rows"`
}

// encode returns the descriptor's JSON.
func (d *descriptor) encode() (writers.Descriptor, error) {
	d.Kind, d.Version = descriptorKind, descriptorVersion
	if d.Upsert != nil {
		d.Version = upsertDescriptorVersion
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("delta: encode descriptor: %w", err)
	}
	return b, nil
}

// decodeDescriptor parses and checks one descriptor. Anything that is not a
// Delta descriptor of this version, or whose files point outside the table
// root, is ErrInvalid: publishing it could reference arbitrary objects.
func decodeDescriptor(b writers.Descriptor) (*descriptor, error) {
	var d descriptor
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, writers.Errorf(writers.ErrInvalid, "delta: descriptor is not a Delta sink descriptor (%w): hand over only descriptors precommitted by a delta endpoint", err)
	}
	if dec.More() {
		return nil, writers.Errorf(writers.ErrInvalid, "delta: descriptor has trailing data: hand over the descriptor exactly as precommit returned it")
	}
	wantVersion := descriptorVersion
	if d.Upsert != nil {
		wantVersion = upsertDescriptorVersion
	}
	if d.Kind != descriptorKind || d.Version != wantVersion {
		return nil, writers.Errorf(writers.ErrInvalid, "delta: descriptor kind %q version %d is not %q version %d: hand over only descriptors precommitted by a delta endpoint of this Quiver version", d.Kind, d.Version, descriptorKind, wantVersion)
	}
	if len(d.Adds) > 0 && d.Schema == "" {
		return nil, writers.Errorf(writers.ErrInvalid, "delta: descriptor has %d files but no schema", len(d.Adds))
	}
	for _, a := range d.Adds {
		if err := checkAddPath(a.Path); err != nil {
			return nil, err
		}
		if a.Size < 0 || a.Rows < 0 {
			return nil, writers.Errorf(writers.ErrInvalid, "delta: descriptor file %q has a negative size or row count", a.Path)
		}
	}
	if u := d.Upsert; u != nil {
		if u.ReadVersion < 0 {
			return nil, writers.Errorf(writers.ErrInvalid, "delta: upsert descriptor has read version %d", u.ReadVersion)
		}
		for _, p := range append(slices.Clip(u.ReadFiles), u.Removes...) {
			if err := checkAddPath(p); err != nil {
				return nil, err
			}
		}
		if err := u.checkUpdates(); err != nil {
			return nil, err
		}
	}
	return &d, nil
}

// checkUpdates accepts deletion-vector updates only of clean paths, each
// with a deletion vector stored in the plan's own DV file: a descriptor
// must not reference arbitrary objects.
func (u *upsertPlan) checkUpdates() error {
	if len(u.Updates) == 0 {
		return nil
	}
	if err := checkAddPath(u.DVFile); err != nil {
		return err
	}
	for _, up := range u.Updates {
		if err := checkAddPath(up.Path); err != nil {
			return err
		}
		if up.DeletionVector == nil {
			return writers.Errorf(writers.ErrInvalid, "delta: descriptor update of %q has no deletion vector", up.Path)
		}
		key, ok, err := deltalog.DeletionVectorKey(up.DeletionVector)
		if err != nil || !ok || key != u.DVFile || up.DeletionVector.Cardinality <= 0 || up.DeletionVector.Cardinality >= up.Rows {
			return writers.Errorf(writers.ErrInvalid, "delta: descriptor update of %q has a deletion vector outside the plan's file %q", up.Path, u.DVFile)
		}
	}
	return nil
}

// checkAddPath accepts only clean relative paths inside the table root,
// outside the _delta_log folder, both as logged and as the storage key
// they decode to (once, as readers decode them).
func checkAddPath(p string) error {
	key, err := url.PathUnescape(p)
	if err != nil {
		return writers.Errorf(writers.ErrInvalid, "delta: descriptor file path %q is not URI-encoded: %w", p, err)
	}
	for _, s := range []string{p, key} {
		clean := path.Clean(s)
		switch {
		case s == "" || strings.Contains(s, "://") || strings.HasPrefix(s, "/"):
			return writers.Errorf(writers.ErrInvalid, "delta: descriptor file path %q is not relative to the table root", p)
		case clean != s || clean == "." || clean == ".." || strings.HasPrefix(clean, "../"):
			return writers.Errorf(writers.ErrInvalid, "delta: descriptor file path %q is not a clean path inside the table", p)
		case strings.HasPrefix(clean, "_delta_log/"):
			return writers.Errorf(writers.ErrInvalid, "delta: descriptor file path %q points into the Delta log", p)
		}
	}
	return nil
}

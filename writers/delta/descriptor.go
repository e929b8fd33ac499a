package delta

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog/dv"
	"github.com/quiver-ingest/quiver/writers/storage"
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
//	"dvFile":"deletion_vector_….bin","dvFileSize":1234
//
// A descriptor is client input (the commit action hands them over), so
// decodeDescriptor checks what it can alone: every path is a clean key
// under the table root (storage.CheckKey) outside _delta_log, and a plan
// removes or marks only files it says it read, with deletion vectors
// inside its own DV file. Commit checks the rest against the table
// (verifyFiles, checkReadSet).
type descriptor struct {
	Kind             string      `json:"kind"`
	Version          int         `json:"version"`
	Schema           string      `json:"schema"`
	PartitionColumns []string    `json:"partitionColumns"`
	Adds             []addFile   `json:"adds"`
	Upsert           *upsertPlan `json:"upsert,omitempty"`
	// Identity is the identity column values the files hold that the
	// sink generated, by column (deltalayout.IdentityFill).
	Identity map[string]deltalayout.IdentityRange `json:"identity,omitempty"`
	// MappedAfter is the table's maxColumnId when the columns the files
	// add were given column mapping (newcolumns.go; nil without).
	MappedAfter *int64 `json:"mappedAfter,omitempty"`
	// Constraints is the table's CHECK constraints and invariants the
	// rows were checked against, expression by name
	// (deltalayout.Layout.CheckRows).
	Constraints map[string]string `json:"constraints,omitempty"`
}

// upsertPlan is what an upsert's commit needs besides its adds: the table
// version it was planned against (-1: no table, its commit creates it),
// the files whose keys it read (its read
// set for conflict checks) and the files it rewrote, which the commit
// removes. Paths are add paths as logged. DVFileSize is the DV file's
// exact size, checked before the commit references it.
type upsertPlan struct {
	ReadVersion int64             `json:"readVersion"`
	ReadFiles   []string          `json:"readFiles"`
	Removes     []string          `json:"removes"`
	ReadDVs     map[string]string `json:"readDVs,omitempty"`
	Updates     []dvUpdate        `json:"updates,omitempty"`
	DVFile      string            `json:"dvFile,omitempty"`
	DVFileSize  int64             `json:"dvFileSize,omitempty"`

	index int // of its descriptor in the Commit, for errors (upsertOf)
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

// addFile is the content of one Delta add action, as the Delta protocol
// ("Add File and Remove File") spells it. Path is relative to the table root and URI-encoded.
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
		// Row ids are handed out by the stats' numRecords: they must
		// count the rows the plan wrote.
		if n, ok := deltalog.StatsNumRecords(a.Stats); a.Stats != "" && (!ok || n != a.Rows) {
			return nil, writers.Errorf(writers.ErrInvalid, "delta: descriptor file %q has stats whose numRecords is not its %d rows", a.Path, a.Rows)
		}
	}
	if u := d.Upsert; u != nil {
		if err := u.check(); err != nil {
			return nil, err
		}
	}
	return &d, nil
}

// check accepts a plan whose paths are clean, which removes or marks only
// files it read (each once), and whose deletion vectors lie in its own DV
// file: a descriptor must not reference, remove or mark arbitrary objects.
func (u *upsertPlan) check() error {
	// -1: planned before the table existed, so nothing was read.
	if u.ReadVersion < -1 || u.ReadVersion == -1 && len(u.ReadFiles) > 0 {
		return writers.Errorf(writers.ErrInvalid, "delta: upsert descriptor has read version %d", u.ReadVersion)
	}
	read := make(map[string]bool, len(u.ReadFiles))
	for _, p := range u.ReadFiles {
		if err := checkAddPath(p); err != nil {
			return err
		}
		read[p] = true
	}
	for p := range u.ReadDVs {
		if !read[p] {
			return writers.Errorf(writers.ErrInvalid, "delta: upsert descriptor states the deletion vector of %q, which it did not read", p)
		}
	}
	changed := make(map[string]bool, len(u.Removes)+len(u.Updates))
	for _, p := range append(slices.Clip(u.Removes), u.updatePaths()...) {
		switch {
		case !read[p]:
			return writers.Errorf(writers.ErrInvalid, "delta: upsert descriptor removes or marks %q, which is not among the files it read", p)
		case changed[p]:
			return writers.Errorf(writers.ErrInvalid, "delta: upsert descriptor removes or marks %q twice", p)
		}
		changed[p] = true
	}
	return u.checkUpdates()
}

// updatePaths returns the paths of the files u marks.
func (u *upsertPlan) updatePaths() []string {
	paths := make([]string, len(u.Updates))
	for i, up := range u.Updates {
		paths[i] = up.Path
	}
	return paths
}

// checkUpdates accepts deletion-vector updates only with a deletion vector
// stored in the plan's own DV file, within its stated size (Spark's
// layout: a version byte, then per vector a 4-byte size, the bitmap and a
// 4-byte CRC at Offset).
func (u *upsertPlan) checkUpdates() error {
	if len(u.Updates) == 0 {
		return nil
	}
	if err := checkAddPath(u.DVFile); err != nil {
		return err
	}
	if u.DVFileSize <= 0 {
		return writers.Errorf(writers.ErrInvalid, "delta: upsert descriptor does not state the size of its deletion-vector file %q (precommitted by an earlier Quiver build?): roll back and replay the transaction", u.DVFile)
	}
	for _, up := range u.Updates {
		d := up.DeletionVector
		if d == nil {
			return writers.Errorf(writers.ErrInvalid, "delta: descriptor update of %q has no deletion vector", up.Path)
		}
		key, ok, err := dv.DeletionVectorKey(d)
		if err != nil || !ok || key != u.DVFile || d.Cardinality <= 0 || d.Cardinality >= up.Rows {
			return writers.Errorf(writers.ErrInvalid, "delta: descriptor update of %q has a deletion vector outside the plan's file %q", up.Path, u.DVFile)
		}
		if d.Offset == nil || *d.Offset < 1 || d.SizeInBytes <= 0 || int64(*d.Offset)+8+int64(d.SizeInBytes) > u.DVFileSize {
			return writers.Errorf(writers.ErrInvalid, "delta: descriptor update of %q has a deletion vector outside the %d bytes of %q", up.Path, u.DVFileSize, u.DVFile)
		}
	}
	return nil
}

// checkAddPath accepts only paths that name a key under the table root,
// outside the _delta_log folder: relative (no URI scheme, as readers
// resolve the logged path as a URI) and a valid storage key
// (storage.CheckKey: no leading '/', no empty, "." or ".." segment) both
// as logged and as the key it decodes to (once, as readers decode it).
func checkAddPath(p string) error {
	key, err := deltalog.DecodePath(p)
	if err != nil {
		return writers.Errorf(writers.ErrInvalid, "delta: descriptor file path %q is not a URI-encoded path relative to the table root: %w", p, err)
	}
	for _, s := range []string{p, key} {
		if err := storage.CheckKey(s); err != nil {
			return writers.Errorf(writers.ErrInvalid, "delta: descriptor file path %q is not a clean key inside the table: %w", p, err)
		}
	}
	if strings.HasPrefix(key, "_delta_log/") {
		return writers.Errorf(writers.ErrInvalid, "delta: descriptor file path %q points into the Delta log", p)
	}
	return nil
}

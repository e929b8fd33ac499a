package deltalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"

	"github.com/quiver-ingest/quiver/writers/parquetio"
)

// V2 checkpoints (the Delta protocol, "V2 Spec Checkpoints"): a top-level
// file, UUID-named (<version>.checkpoint.<uuid>.json|parquet) or
// classic-named, holding a checkpointMetadata action, the non-file actions
// and optionally file actions, plus sidecar actions naming Parquet files
// in _delta_log/_sidecars/ that hold more add and remove actions.

// SidecarDir is the folder of V2 checkpoint sidecars under the table root.
const SidecarDir = LogDir + "_sidecars/"

// maxSidecars bounds the sidecars one checkpoint may name and
// maxSidecarBytes the bytes they hold together: each is read whole, one
// after the other, so the bounds keep a hostile checkpoint from making
// replay open files or hold actions without end. A sidecar named twice is
// refused for the same reason (and would duplicate its files).
const (
	maxSidecars     = 10_000
	maxSidecarBytes = 4 << 30
)

var v2CheckpointRe = regexp.MustCompile(`^(\d{20})\.checkpoint\.[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\.(json|parquet)$`)

// Sidecar is a V2 checkpoint's sidecar action.
type Sidecar struct {
	Path             string `json:"path"`
	SizeInBytes      int64  `json:"sizeInBytes"`
	ModificationTime int64  `json:"modificationTime"`
}

// checkpointMetadata is a V2 checkpoint's checkpointMetadata action.
type checkpointMetadata struct {
	Version int64 `json:"version"`
}

// cpTopRow reads the V2-only columns of a Parquet checkpoint (absent in
// classic ones: parquet-go matches columns by name).
type cpTopRow struct {
	CheckpointMetadata *struct {
		Version *int64 `parquet:"version,optional"`
	} `parquet:"checkpointMetadata,optional"`
	Sidecar *struct {
		Path             *string `parquet:"path,optional"`
		SizeInBytes      *int64  `parquet:"sizeInBytes,optional"`
		ModificationTime *int64  `parquet:"modificationTime,optional"`
	} `parquet:"sidecar,optional"`
}

// SidecarKey returns the storage key of a sidecar action's file. The path
// must name a file in _delta_log/_sidecars: a bare file name, URI-encoded
// (as Spark writes it), or an absolute URI or path that resolves into this
// table's _delta_log/_sidecars (the protocol allows those; the table root
// is store's URI when it has one). Anything else is ErrCorrupt, so a
// hostile log cannot make replay read files elsewhere.
func SidecarKey(store Store, path string) (string, error) {
	name, err := url.PathUnescape(path)
	if err == nil && strings.ContainsAny(path, "/:") {
		name, err = absoluteSidecarName(store, path)
	}
	if err != nil || name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\:") {
		return "", fmt.Errorf("delta: sidecar path %q is not a file name in %s: %w", path, SidecarDir, ErrCorrupt)
	}
	return SidecarDir + name, nil
}

// absoluteSidecarName returns the file name of an absolute sidecar path
// under the table root's _delta_log/_sidecars/. Hadoop spellings (file:/x,
// s3a://) match the root's (file:///x, s3://).
func absoluteSidecarName(store Store, path string) (string, error) {
	r, ok := store.(interface{ URI() string })
	if !ok {
		return "", errors.New("the table root is unknown")
	}
	root, err := url.Parse(r.URI())
	if err != nil {
		return "", err
	}
	u, err := url.Parse(path)
	if err != nil {
		return "", err
	}
	if u.Scheme == "" && strings.HasPrefix(u.Path, "/") {
		u.Scheme = "file" // a bare absolute path is a local one
	}
	scheme := func(s string) string {
		if s = strings.ToLower(s); s == "s3a" || s == "s3n" {
			return "s3"
		}
		return s
	}
	dir := strings.TrimSuffix(root.Path, "/") + "/" + SidecarDir
	name, ok := strings.CutPrefix(u.Path, dir)
	if scheme(u.Scheme) != scheme(root.Scheme) || u.Host != root.Host || !ok || u.RawQuery != "" || u.Fragment != "" {
		return "", errors.New("not in the table's sidecar folder")
	}
	return name, nil
}

// readV2Sidecars returns the file actions of the sidecars of one
// checkpoint, read one after the other. A sidecar holding anything but
// add and remove actions is ErrCorrupt.
func readV2Sidecars(ctx context.Context, store Store, sidecars []Sidecar) ([]Action, error) {
	if len(sidecars) > maxSidecars {
		return nil, fmt.Errorf("delta: checkpoint names %d sidecars, more than %d: %w", len(sidecars), maxSidecars, ErrCorrupt)
	}
	var out []Action
	seen := map[string]bool{}
	total := 0
	for _, sc := range sidecars {
		key, err := SidecarKey(store, sc.Path)
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, fmt.Errorf("delta: checkpoint names sidecar %s twice: %w", key, ErrCorrupt)
		}
		seen[key] = true
		f, err := readCheckpointFile(ctx, store, key, int64(maxSidecarBytes-total))
		if err != nil {
			return nil, err
		}
		if total += f.size; total > maxSidecarBytes {
			return nil, fmt.Errorf("delta: the sidecars of a checkpoint hold more than %d bytes: %w", maxSidecarBytes, ErrCorrupt)
		}
		for _, a := range f.actions {
			if a.Add == nil && a.Remove == nil {
				return nil, fmt.Errorf("delta: sidecar %s holds an action other than add or remove: %w", key, ErrCorrupt)
			}
		}
		out = append(out, f.actions...)
	}
	return out, nil
}

// checkpointFile is what one checkpoint file holds.
type checkpointFile struct {
	actions  []Action
	sidecars []Sidecar
	meta     *int64 // the checkpointMetadata version; nil without one
	size     int    // bytes
}

// setMeta records a checkpointMetadata version; a second one is ErrCorrupt.
func (f *checkpointFile) setMeta(key string, v int64) error {
	if f.meta != nil {
		return fmt.Errorf("delta: checkpoint %s holds more than one checkpointMetadata: %w", key, ErrCorrupt)
	}
	f.meta = &v
	return nil
}

// readJSONCheckpoint decodes a JSON V2 checkpoint: its actions (as
// commits are decoded), its sidecars and its checkpointMetadata.
func readJSONCheckpoint(key string, data []byte) (checkpointFile, error) {
	f := checkpointFile{size: len(data)}
	err := eachLine(data, func(n int, line []byte) error {
		a, err := decodeAction(line)
		if err == nil && a.empty() {
			var l struct {
				Sidecar            *Sidecar            `json:"sidecar"`
				CheckpointMetadata *checkpointMetadata `json:"checkpointMetadata"`
			}
			if err = json.Unmarshal(line, &l); err == nil && l.Sidecar != nil {
				f.sidecars = append(f.sidecars, *l.Sidecar)
			}
			if err == nil && l.CheckpointMetadata != nil {
				err = f.setMeta(key, l.CheckpointMetadata.Version)
			}
		}
		if err != nil {
			return fmt.Errorf("delta: checkpoint %s line %d: %w: %w", key, n, ErrCorrupt, err)
		}
		if !a.empty() {
			f.actions = append(f.actions, a)
		}
		return nil
	})
	if err != nil {
		return checkpointFile{}, err
	}
	return f, nil
}

// readParquetV2 reads the sidecar and checkpointMetadata actions of a
// Parquet checkpoint into cf (none in a classic one).
func readParquetV2(f *parquet.File, key string, cf *checkpointFile) error {
	_, hasSidecars := f.Schema().Lookup("sidecar", "path")
	if _, hasMeta := f.Schema().Lookup("checkpointMetadata", "version"); !hasSidecars && !hasMeta {
		return nil
	}
	pr := parquet.NewGenericReader[cpTopRow](f)
	defer pr.Close()
	rows := make([]cpTopRow, 256)
	for {
		n, err := pr.Read(rows)
		for _, r := range rows[:n] {
			if m := r.CheckpointMetadata; m != nil && m.Version != nil {
				if err := cf.setMeta(key, *m.Version); err != nil {
					return err
				}
			}
			if s := r.Sidecar; s != nil && s.Path != nil {
				cf.sidecars = append(cf.sidecars, Sidecar{Path: *s.Path, SizeInBytes: deref(s.SizeInBytes), ModificationTime: deref(s.ModificationTime)})
				if len(cf.sidecars) > maxSidecars {
					return fmt.Errorf("delta: checkpoint %s names more than %d sidecars: %w", key, maxSidecars, ErrCorrupt)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("delta: checkpoint %s: %w: %w", key, ErrCorrupt, err)
		}
	}
}

// openParquetCheckpoint checks data's layout against its bytes before
// parquet-go sizes anything by it.
func openParquetCheckpoint(key string, data []byte) (*parquet.File, error) {
	f, err := parquetio.OpenChecked(data)
	if err != nil {
		return nil, fmt.Errorf("delta: checkpoint %s: %w: %w", key, ErrCorrupt, err)
	}
	return f, nil
}

// V2Checkpoints reports whether checkpoints of the table of s are V2
// checkpoints: the v2Checkpoint feature is listed or
// delta.checkpointPolicy is v2.
func V2Checkpoints(s *Snapshot) bool {
	return s.Protocol.HasWriterFeature("v2Checkpoint") || strings.EqualFold(s.Metadata.Configuration["delta.checkpointPolicy"], "v2")
}

// writeV2Checkpoint writes s as a UUID-named JSON V2 checkpoint without
// sidecars (every action inline, checkpointMetadata first) and returns its
// key and size.
func writeV2Checkpoint(ctx context.Context, store Store, s *Snapshot, now time.Time) (string, int64, int64, error) {
	actions := checkpointActions(s, now)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]checkpointMetadata{"checkpointMetadata": {Version: s.Version}}); err != nil {
		return "", 0, 0, fmt.Errorf("delta: checkpoint %d: encode: %w", s.Version, err)
	}
	for _, a := range actions {
		if err := enc.Encode(a); err != nil {
			return "", 0, 0, fmt.Errorf("delta: checkpoint %d: encode: %w", s.Version, err)
		}
	}
	key := fmt.Sprintf("%s%020d.checkpoint.%s.json", LogDir, s.Version, uuid.NewString())
	if err := store.Put(ctx, key, buf.Bytes()); err != nil {
		return "", 0, 0, StorageError("write", key, err)
	}
	return key, int64(buf.Len()), int64(len(actions) + 1), nil
}

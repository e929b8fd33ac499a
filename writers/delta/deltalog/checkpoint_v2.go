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

// maxSidecars bounds the sidecars one checkpoint may name: each is read
// whole, one after the other, so the bound keeps a hostile checkpoint from
// making replay open files without end.
const maxSidecars = 10_000

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
	Sidecar *struct {
		Path             *string `parquet:"path,optional"`
		SizeInBytes      *int64  `parquet:"sizeInBytes,optional"`
		ModificationTime *int64  `parquet:"modificationTime,optional"`
	} `parquet:"sidecar,optional"`
}

// SidecarKey returns the storage key of a sidecar action's file. The path
// must name a file in _delta_log/_sidecars (as Spark writes it: a bare file
// name, URI-encoded); anything else is ErrCorrupt, so a hostile log cannot
// make replay read files elsewhere.
func SidecarKey(path string) (string, error) {
	name, err := url.PathUnescape(path)
	if err != nil || name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\:") {
		return "", fmt.Errorf("delta: sidecar path %q is not a file name in %s: %w", path, SidecarDir, ErrCorrupt)
	}
	return SidecarDir + name, nil
}

// readV2Sidecars returns the file actions of the sidecars of one
// checkpoint, read one after the other. A sidecar holding anything but
// add and remove actions is ErrCorrupt.
func readV2Sidecars(ctx context.Context, store Store, sidecars []Sidecar) ([]Action, error) {
	if len(sidecars) > maxSidecars {
		return nil, fmt.Errorf("delta: checkpoint names %d sidecars, more than %d: %w", len(sidecars), maxSidecars, ErrCorrupt)
	}
	var out []Action
	for _, sc := range sidecars {
		key, err := SidecarKey(sc.Path)
		if err != nil {
			return nil, err
		}
		actions, _, err := readCheckpointFile(ctx, store, key)
		if err != nil {
			return nil, err
		}
		for _, a := range actions {
			if a.Add == nil && a.Remove == nil {
				return nil, fmt.Errorf("delta: sidecar %s holds an action other than add or remove: %w", key, ErrCorrupt)
			}
		}
		out = append(out, actions...)
	}
	return out, nil
}

// readJSONCheckpoint decodes a JSON V2 checkpoint: its actions (as
// commits are decoded) and its sidecars.
func readJSONCheckpoint(key string, data []byte) ([]Action, []Sidecar, error) {
	var (
		actions  []Action
		sidecars []Sidecar
	)
	err := eachLine(data, func(n int, line []byte) error {
		a, err := decodeAction(line)
		if err == nil && a.empty() {
			var l struct {
				Sidecar *Sidecar `json:"sidecar"`
			}
			if err = json.Unmarshal(line, &l); err == nil && l.Sidecar != nil {
				sidecars = append(sidecars, *l.Sidecar)
			}
		}
		if err != nil {
			return fmt.Errorf("delta: checkpoint %s line %d: %w: %w", key, n, ErrCorrupt, err)
		}
		if !a.empty() {
			actions = append(actions, a)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return actions, sidecars, nil
}

// readParquetSidecars reads the sidecar actions of a Parquet checkpoint
// (none in a classic one).
func readParquetSidecars(f *parquet.File, key string) ([]Sidecar, error) {
	if _, ok := f.Schema().Lookup("sidecar", "path"); !ok {
		return nil, nil
	}
	pr := parquet.NewGenericReader[cpTopRow](f)
	defer pr.Close()
	var out []Sidecar
	rows := make([]cpTopRow, 256)
	for {
		n, err := pr.Read(rows)
		for _, r := range rows[:n] {
			if s := r.Sidecar; s != nil && s.Path != nil {
				out = append(out, Sidecar{Path: *s.Path, SizeInBytes: deref(s.SizeInBytes), ModificationTime: deref(s.ModificationTime)})
				if len(out) > maxSidecars {
					return nil, fmt.Errorf("delta: checkpoint %s names more than %d sidecars: %w", key, maxSidecars, ErrCorrupt)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("delta: checkpoint %s: %w: %w", key, ErrCorrupt, err)
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
		return "", 0, 0, storageErr("write", key, err)
	}
	return key, int64(buf.Len()), int64(len(actions) + 1), nil
}

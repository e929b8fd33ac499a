package deltalog

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Row tracking (the Delta protocol, "Row Tracking"): while the rowTracking
// writer feature is listed and not suspended, every add carries baseRowId
// and defaultRowCommitVersion, and the commit advances the delta.rowTracking
// domain's rowIdHighWaterMark past the ids it hands out. A row's id is the
// value of the materialized row-id column in its file when not null, else
// baseRowId + its position in the file; its commit version likewise.

// RowTrackingDomain is the system domain holding the row-id high-water mark.
const RowTrackingDomain = "delta.rowTracking"

// rowTrackingPreservedTag is the commitInfo tag saying that a commit kept
// the row ids and commit versions of the rows it rewrote.
const rowTrackingPreservedTag = "delta.rowTracking.preserved"

// Table properties naming the hidden columns that materialize row ids and
// row commit versions in data files.
const (
	MaterializedRowIDProperty            = "delta.rowTracking.materializedRowIdColumnName"
	MaterializedRowCommitVersionProperty = "delta.rowTracking.materializedRowCommitVersionColumnName"
)

// RowTrackingOn reports whether commits to the table of s must assign row
// ids: the feature is listed (enabled or not) and not suspended.
func RowTrackingOn(s *Snapshot) bool {
	return rowTrackingOn(s.Protocol, s.Metadata.Configuration)
}

func rowTrackingOn(p Protocol, conf map[string]string) bool {
	return p.HasWriterFeature("rowTracking") && !strings.EqualFold(conf["delta.rowTrackingSuspended"], "true")
}

// RowIDHighWaterMark returns the highest row id assigned in the table of s,
// -1 when none was (no domain yet). A domain that does not parse is
// ErrCorrupt.
func (s *Snapshot) RowIDHighWaterMark() (int64, error) {
	d, ok := s.domains[RowTrackingDomain]
	if !ok {
		return -1, nil
	}
	var c struct {
		HWM *int64 `json:"rowIdHighWaterMark"`
	}
	if err := json.Unmarshal([]byte(d.Configuration), &c); err != nil || c.HWM == nil || *c.HWM < -1 {
		return 0, fmt.Errorf("delta: domain %s: configuration %q has no valid rowIdHighWaterMark: %w", RowTrackingDomain, d.Configuration, ErrCorrupt)
	}
	return *c.HWM, nil
}

// assignRowIDs returns actions with fresh row ids for every add without a
// baseRowId (numRecords of its stats each, from above hwm) and version as
// defaultRowCommitVersion of every add without one, plus the
// delta.rowTracking domain's new high-water mark when it moved. Adds that
// re-add a live file (a new deletion vector) keep the ids and version
// they had. The caller's actions are not modified.
func assignRowIDs(actions []Action, hwm, version int64) ([]Action, error) {
	if hwm == math.MaxInt64 {
		return nil, fmt.Errorf("delta: row tracking: the row-id high-water mark is at its maximum: %w", ErrUnsupported)
	}
	out := make([]Action, 0, len(actions)+1)
	next := hwm + 1
	for _, a := range actions {
		if a.Add == nil || (a.Add.BaseRowID != nil && a.Add.DefaultRowCommitVersion != nil) {
			out = append(out, a)
			continue
		}
		add := *a.Add
		if add.BaseRowID == nil {
			n, ok := StatsNumRecords(add.Stats)
			if !ok {
				return nil, fmt.Errorf("delta: row tracking: add %s has no numRecords in its stats, so it cannot be given row ids: %w", add.Path, ErrUnsupported)
			}
			if n > math.MaxInt64-next {
				return nil, fmt.Errorf("delta: row tracking: add %s: %d rows above row id %d overflow the row ids: %w", add.Path, n, next, ErrUnsupported)
			}
			base := next
			add.BaseRowID = &base
			next += n
		}
		if add.DefaultRowCommitVersion == nil {
			v := version
			add.DefaultRowCommitVersion = &v
		}
		out = append(out, Action{Add: &add})
	}
	if next-1 > hwm {
		conf, _ := json.Marshal(map[string]int64{"rowIdHighWaterMark": next - 1})
		out = append(out, Action{DomainMetadata: &DomainMetadata{Domain: RowTrackingDomain, Configuration: string(conf)}})
	}
	return out, nil
}

// StatsNumRecords returns the numRecords of an add's stats; ok is false
// when the stats do not parse or lack it (ParseStats reads a missing key
// as 0, which would hand the file's rows ids that the next file gets too),
// or it is negative or beyond int64.
func StatsNumRecords(stats string) (n int64, ok bool) {
	var st struct {
		NumRecords *int64 `json:"numRecords"`
	}
	if json.Unmarshal([]byte(stats), &st) != nil || st.NumRecords == nil || *st.NumRecords < 0 {
		return 0, false
	}
	return *st.NumRecords, true
}

// carriedRowIDs returns the paths of the adds of actions that re-add a
// file live in read with the row ids read gave it (an upsert marking rows
// of a file it read): only those ids may be stale when the commit lands
// on a later snapshot. Adds that set other ids keep them.
func carriedRowIDs(read *Snapshot, actions []Action) map[string]bool {
	if read == nil {
		return nil
	}
	paths := map[string]*Add{}
	for _, a := range actions {
		if a.Add != nil && a.Add.BaseRowID != nil {
			paths[a.Add.Path] = a.Add
		}
	}
	out := map[string]bool{}
	for _, f := range read.files {
		if a := paths[f.Path]; a != nil && f.BaseRowID != nil && *f.BaseRowID == *a.BaseRowID {
			out[f.Path] = true
		}
	}
	return out
}

// liveRowIDs returns actions with every add of a carried path (see
// carriedRowIDs) live in snap, the snapshot the commit lands on, taking
// that file's baseRowId and defaultRowCommitVersion from snap: a
// concurrent commit may have given the file other ids since the writer
// read it. The caller's actions are not modified.
func liveRowIDs(actions []Action, snap *Snapshot, carried map[string]bool) []Action {
	if snap == nil || len(carried) == 0 {
		return actions
	}
	live := map[string]*Add{}
	for _, f := range snap.files {
		if carried[f.Path] && f.BaseRowID != nil {
			live[f.Path] = f
		}
	}
	if len(live) == 0 {
		return actions
	}
	out := slices.Clone(actions)
	for i, a := range out {
		if f := live[pathOf(a)]; f != nil {
			add := *a.Add
			add.BaseRowID, add.DefaultRowCommitVersion = f.BaseRowID, f.DefaultRowCommitVersion
			out[i] = Action{Add: &add}
		}
	}
	return out
}

// pathOf is the path of an add action, "" for other actions.
func pathOf(a Action) string {
	if a.Add == nil {
		return ""
	}
	return a.Add.Path
}

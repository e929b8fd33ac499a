package deltalog

import (
	"encoding/json"
	"fmt"
	"math"
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

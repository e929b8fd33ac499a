package deltalog

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// DefaultCheckpointInterval is delta.checkpointInterval's default.
const DefaultCheckpointInterval = 10

// Snapshot is the reconciled table state at Version. It is immutable once
// returned: share it freely between goroutines and never modify what its
// methods return (the *Add values are shared with the snapshot).
type Snapshot struct {
	Version  int64
	Protocol Protocol
	Metadata Metadata

	files      map[string]*Add    // logical-file key → live add
	tombstones map[string]*Remove // logical-file key → remove
	txns       map[string]Txn     // appId → latest txn
	domains    map[string]DomainMetadata
	// commitInfo of the commit at Version, when it was replayed from JSON
	// (checkpoints do not keep commitInfo).
	commitInfo *CommitInfo

	hasProtocol, hasMetadata bool
}

func newSnapshot() *Snapshot {
	return &Snapshot{
		Version:    -1,
		files:      map[string]*Add{},
		tombstones: map[string]*Remove{},
		txns:       map[string]Txn{},
		domains:    map[string]DomainMetadata{},
	}
}

// clone copies the maps so the copy can replay further commits.
func (s *Snapshot) clone() *Snapshot {
	c := *s
	c.files = maps.Clone(s.files)
	c.tombstones = maps.Clone(s.tombstones)
	c.txns = maps.Clone(s.txns)
	c.domains = maps.Clone(s.domains)
	return &c
}

// apply replays one commit (or checkpoint) of version v: last protocol,
// metaData, txn per appId and domain per name win; file actions are keyed
// by (path, deletion vector).
func (s *Snapshot) apply(v int64, actions []Action) {
	s.Version = v
	s.commitInfo = nil
	for _, a := range actions {
		switch {
		case a.CommitInfo != nil:
			s.commitInfo = a.CommitInfo
		case a.Protocol != nil:
			s.Protocol, s.hasProtocol = *a.Protocol, true
		case a.MetaData != nil:
			s.Metadata, s.hasMetadata = *a.MetaData, true
		case a.Txn != nil:
			s.txns[a.Txn.AppID] = *a.Txn
		case a.DomainMetadata != nil:
			if a.DomainMetadata.Removed {
				delete(s.domains, a.DomainMetadata.Domain)
			} else {
				s.domains[a.DomainMetadata.Domain] = *a.DomainMetadata
			}
		case a.Add != nil:
			k := a.Add.Key()
			s.files[k] = a.Add
			delete(s.tombstones, k)
		case a.Remove != nil:
			k := a.Remove.Key()
			delete(s.files, k)
			s.tombstones[k] = a.Remove
		}
	}
}

// Files returns the live data files sorted by path.
func (s *Snapshot) Files() []*Add {
	out := slices.Collect(maps.Values(s.files))
	slices.SortFunc(out, func(a, b *Add) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

// NumFiles is the number of live data files.
func (s *Snapshot) NumFiles() int { return len(s.files) }

// Tombstones returns the remove actions still known to the snapshot
// (VACUUM needs them; checkpoints keep them until they expire), sorted by
// path.
func (s *Snapshot) Tombstones() []*Remove {
	out := slices.Collect(maps.Values(s.tombstones))
	slices.SortFunc(out, func(a, b *Remove) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

// TxnVersion returns the latest txn version committed for appID.
func (s *Snapshot) TxnVersion(appID string) (int64, bool) {
	t, ok := s.txns[appID]
	return t.Version, ok
}

// Txns returns the latest txn per appId (a copy).
func (s *Snapshot) Txns() map[string]Txn { return maps.Clone(s.txns) }

// Domain returns the live domainMetadata of domain.
func (s *Snapshot) Domain(domain string) (DomainMetadata, bool) {
	d, ok := s.domains[domain]
	return d, ok
}

// Domains returns the live domain metadata sorted by domain.
func (s *Snapshot) Domains() []DomainMetadata {
	out := slices.Collect(maps.Values(s.domains))
	slices.SortFunc(out, func(a, b DomainMetadata) int { return strings.Compare(a.Domain, b.Domain) })
	return out
}

// Schema parses the table schema.
func (s *Snapshot) Schema() (*Schema, error) { return s.Metadata.Schema() }

// CommitInfo returns the commitInfo of the commit at Version, if the
// snapshot replayed that commit from its JSON file.
func (s *Snapshot) CommitInfo() (*CommitInfo, bool) { return s.commitInfo, s.commitInfo != nil }

// CheckpointInterval is delta.checkpointInterval (default 10; invalid
// values fall back to the default).
func (s *Snapshot) CheckpointInterval() int {
	if n, err := strconv.Atoi(s.Metadata.Configuration["delta.checkpointInterval"]); err == nil && n > 0 {
		return n
	}
	return DefaultCheckpointInterval
}

// NumRecords sums numRecords over the live files' stats (minus deletion
// vector cardinalities); complete is false when some file has no stats.
func (s *Snapshot) NumRecords() (rows int64, complete bool) {
	complete = true
	for _, a := range s.files {
		st, err := ParseStats(a.Stats)
		if a.Stats == "" || err != nil || st.NumRecords < 0 {
			complete = false
			continue
		}
		rows += st.NumRecords
		if a.DeletionVector != nil {
			rows -= a.DeletionVector.Cardinality
		}
	}
	return rows, complete
}

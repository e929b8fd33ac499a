package lance

import (
	"slices"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
)

// mergeOf returns the merge part of descs, nil when none has one. A merge
// is planned against one dataset version, so two merge descriptors cannot
// be published together (merge_insert endpoints do not aggregate
// descriptors): that is ErrInvalid.
func mergeOf(ds []*descriptor) (*mergeDesc, error) {
	var m *mergeDesc
	for _, d := range ds {
		if d.Merge == nil {
			continue
		}
		if m != nil {
			return nil, writers.Errorf(writers.ErrInvalid, "lance: a commit got two merge_insert descriptors, each planned on its own version: commit one merge per transaction")
		}
		m = d.Merge
	}
	return m, nil
}

// apply turns txn into the merge's Update on top of version d (nil: no
// dataset). Every fragment the merge replaces or removes must be in d
// exactly as the plan saw it (same data files, same deletion file):
// otherwise its new deletion file would drop another writer's deletions
// or address rows that moved, so apply returns ErrConflict (the
// transaction must be replayed, which plans the merge again). A merge
// planned on an empty target cannot commit on a dataset created since
// (its inserts may now match), nor the other way round.
func (m *mergeDesc) apply(d *lancetable.Dataset, txn *lancetable.Transaction) error {
	switch {
	case d == nil && m.ReadVersion == 0:
		return nil // the Overwrite that creates the dataset
	case d == nil:
		return writers.Errorf(writers.ErrConflict, "lance: the dataset the merge was planned on (version %d) no longer exists: replay the transaction", m.ReadVersion)
	case m.ReadVersion == 0:
		return writers.Errorf(writers.ErrConflict, "lance: the dataset was created by another writer after the merge was planned on an empty target: replay the transaction")
	}
	txn.Op = lancetable.OpUpdate
	byID := make(map[uint64]*lancetable.Fragment, len(d.Manifest.Fragments))
	for i := range d.Manifest.Fragments {
		byID[d.Manifest.Fragments[i].ID] = &d.Manifest.Fragments[i]
	}
	check := func(t touchedFragment) (*lancetable.Fragment, error) {
		f := byID[t.ID]
		if f == nil || !unchanged(f, t) {
			return nil, writers.Errorf(writers.ErrConflict, "lance: fragment %d changed after the merge was planned on version %d (a concurrent delete, update or compaction): replay the transaction", t.ID, m.ReadVersion)
		}
		return f, nil
	}
	for _, t := range m.Removed {
		if _, err := check(t); err != nil {
			return err
		}
		txn.Removed = append(txn.Removed, t.ID)
	}
	for _, u := range m.Updated {
		f, err := check(u.touchedFragment)
		if err != nil {
			return err
		}
		nf := *f
		del := u.NewDeletion
		nf.Deletion = &del
		txn.Updated = append(txn.Updated, nf)
	}
	return nil
}

// unchanged reports whether f still has the data files and deletion file
// t recorded.
func unchanged(f *lancetable.Fragment, t touchedFragment) bool {
	paths := make([]string, len(f.Files))
	for i, df := range f.Files {
		paths[i] = df.Path
	}
	if !slices.Equal(paths, t.Files) {
		return false
	}
	a, b := f.Deletion, t.Deletion
	if a == nil || b == nil {
		return a == b
	}
	return a.FileType == b.FileType && a.ReadVersion == b.ReadVersion && a.ID == b.ID && a.NumDeletedRows == b.NumDeletedRows
}

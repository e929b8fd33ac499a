package delta

import (
	"slices"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// recordCommitted notes in a the high-water marks the committed actions (of
// descriptors ds) set over those of snap's table.
func recordCommitted(a *deltalayout.IdentityAllocator, snap *deltalog.Snapshot, actions []deltalog.Action, ds []*descriptor) {
	mi := slices.IndexFunc(actions, func(x deltalog.Action) bool { return x.MetaData != nil })
	if mi < 0 {
		return
	}
	before, err1 := snap.Schema()
	after, err2 := actions[mi].MetaData.Schema()
	if err1 != nil || err2 != nil {
		return
	}
	for _, f := range after.Fields {
		now, ok, _ := f.Identity()
		old, had := before.Field(f.Name)
		if !ok || !had {
			continue
		}
		if prev, ok, _ := old.Identity(); ok && now.Assigned && now.HighWaterMark != prev.Last() {
			a.Record(f.Name, prev.Last(), now.HighWaterMark, commitNonce(ds))
		}
	}
}

// commitNonce returns the nonce of the identity values ds carry ("" when
// none; identityHighWaterMarks ensures there is only one).
func commitNonce(ds []*descriptor) string {
	for _, d := range ds {
		for _, r := range d.Identity {
			return r.Nonce
		}
	}
	return ""
}

// identityHighWaterMarks checks the identity values the descriptors ds
// used against the table (evolved: its schema as the commit writes it)
// and returns it with each identity column's high-water mark advanced
// past them; changed reports whether any was. Values another writer may
// have handed out (not beyond the mark, which another writer than alloc's
// advanced since the values were taken) are a conflict (the transaction
// is replayed with fresh values); ranges of columns that are no identity
// columns, or that run against the column's step, are ErrInvalid.
func identityHighWaterMarks(evolved *deltalog.Schema, ds []*descriptor, alloc *deltalayout.IdentityAllocator) (*deltalog.Schema, bool, error) {
	out := &deltalog.Schema{Fields: slices.Clone(evolved.Fields)}
	changed := false
	nonce := commitNonce(ds)
	for i, d := range ds {
		for col, r := range d.Identity {
			if r.Nonce != nonce {
				return nil, false, writers.Errorf(writers.ErrInvalid, "delta: descriptor %d: identity values of %q generated on another server than those of the other descriptors: a transaction that writes identity columns must be precommitted on one server", i, col)
			}
			fi := slices.IndexFunc(out.Fields, func(f deltalog.StructField) bool { return f.Name == col })
			if fi < 0 {
				return nil, false, writers.Errorf(writers.ErrInvalid, "delta: descriptor %d: identity values for %q, which is no table column", i, col)
			}
			// Checked against the table's mark (the descriptors of one
			// allocator hold disjoint values), advanced to the furthest.
			id, ok, err := evolved.Fields[fi].Identity()
			if err != nil || !ok {
				return nil, false, writers.Errorf(writers.ErrInvalid, "delta: descriptor %d: identity values for %q, which is no identity column", i, col)
			}
			if id.Step > 0 && (r.Last < r.First || r.First <= r.Base) || id.Step < 0 && (r.Last > r.First || r.First >= r.Base) {
				return nil, false, writers.Errorf(writers.ErrInvalid, "delta: descriptor %d: identity values %d to %d after %d of %q run against its step %d", i, r.First, r.Last, r.Base, col, id.Step)
			}
			if !id.Beyond(r.First) && !alloc.OwnsSince(col, r, id.Last()) {
				return nil, false, writers.Errorf(writers.ErrConflict, "delta: identity column %q: another writer assigned values after %d since descriptor %d took %d to %d (the table's high-water mark is %d): roll back and replay the transaction", col, r.Base, i, r.First, r.Last, id.Last())
			}
			if now, _, _ := out.Fields[fi].Identity(); now.Beyond(r.Last) {
				out.Fields[fi] = out.Fields[fi].WithHighWaterMark(r.Last)
				changed = true
			}
		}
	}
	if !changed {
		return evolved, false, nil
	}
	return out, true, nil
}

package delta

import (
	"context"
	"fmt"
	"maps"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/storage"
	"github.com/quiver-ingest/quiver/writers/tablesink"
)

// Commit-time checks of descriptors against the endpoint and the table.
// Descriptors are client input; decodeDescriptor checked what they say
// alone, these check what they claim about the world, before anything is
// published, for this server's own descriptors too.

// checkModes refuses descriptors the endpoint's mode cannot have
// precommitted: an upsert plan outside mode upsert (it would remove or mark
// files an append never read) and, in mode upsert, files added without
// the plan that wrote them (blind adds could duplicate keys).
func (w *Writer) checkModes(ds []*descriptor) error {
	m := tablesink.Modes{Sink: "delta", Endpoint: w.env.Endpoint, Mode: w.cfg.WriteMode, PlanMode: ModeUpsert, Plan: "an upsert plan", Files: "files"}
	return m.Check(len(ds), func(i int) (bool, bool) { return ds[i].Upsert != nil, len(ds[i].Adds) > 0 })
}

// verifyFiles checks that every file ds add, and the deletion-vector file
// of their plan, exists under the table root with its stated size: a log
// entry naming a missing or different file leaves the table unreadable.
// It costs one stat per file (storage.CheckObjects runs them 16 at a time).
func (w *Writer) verifyFiles(ctx context.Context, ds []*descriptor) error {
	var want []storage.Expected
	for i, d := range ds {
		written, err := d.written(fmt.Sprintf("delta: endpoint %q: descriptor %d", w.env.Endpoint, i))
		if err != nil {
			return err
		}
		want = append(want, written...)
	}
	return w.bucket.CheckObjects(ctx, want)
}

// written lists the objects d's precommit wrote: the added data files and
// an upsert's deletion-vector file (never the files it read, rewrote or
// marked, which the table already holds).
func (d *descriptor) written(label string) ([]storage.Expected, error) {
	var out []storage.Expected
	for _, a := range d.Adds {
		key, err := deltalog.DecodePath(a.Path)
		if err != nil { // decodeDescriptor refuses such paths
			return nil, writers.Errorf(writers.ErrInvalid, "%s: %w", label, err)
		}
		out = append(out, storage.Expected{Key: key, Size: a.Size, Label: label})
	}
	if u := d.Upsert; u != nil && len(u.Updates) > 0 {
		out = append(out, storage.Expected{Key: u.DVFile, Size: u.DVFileSize, Label: label})
	}
	return out, nil
}

// writtenFiles is written of an encoded descriptor (tablesink.Discards).
func writtenFiles(b writers.Descriptor) ([]storage.Expected, error) {
	d, err := decodeDescriptor(b)
	if err != nil {
		return nil, err
	}
	return d.written("delta: discarded precommit")
}

// checkReadSet checks what plan claims it read: every file of its read set
// was live at its read version (base) with the deletion vector the plan
// states. deltalog checks the commits since against that read set (and
// upsertActions that the files are still so), so together a plan removes
// or marks only files that were live, as it saw them, from its read
// version to the commit.
func (w *Writer) checkReadSet(base *deltalog.Snapshot, plan *upsertPlan) error {
	live := make(map[string]string, base.NumFiles())
	for _, a := range base.Files() {
		live[a.Path] = a.DeletionVector.UniqueID()
	}
	for _, p := range plan.ReadFiles {
		if dv, ok := live[p]; !ok || dv != plan.ReadDVs[p] {
			return writers.Errorf(writers.ErrInvalid, "delta: endpoint %q: descriptor %d: file %q was not live at version %d with the deletion vector the upsert plan states (a forged plan, or the table was recreated): roll back the transaction and replay it", w.env.Endpoint, plan.index, p, plan.ReadVersion)
		}
	}
	return nil
}

// checkConstraints refuses descriptors whose rows were checked against
// other constraints than the table of meta has now: a constraint added
// (or changed) after the rows were checked would let rows violating it
// in. ErrConflict: a replay checks them against the table as it is.
func checkConstraints(meta *deltalog.Metadata, ds []*descriptor) error {
	cons, err := deltalog.Constraints(meta)
	if err != nil { // the commit checked the table (CheckWritable)
		return writers.Errorf(writers.ErrInvalid, "delta: %v", err)
	}
	want := deltalayout.CheckedConstraints(cons)
	for i, d := range ds {
		if len(d.Adds) == 0 || maps.Equal(d.Constraints, want) {
			continue
		}
		for _, c := range cons {
			if text, ok := d.Constraints[c.Name]; !ok || text != c.Text {
				return writers.Errorf(writers.ErrConflict, "delta: descriptor %d: the table's %s was added or changed after the rows were checked: roll back the transaction and replay it", i, c)
			}
		}
		// A constraint dropped since: the rows were checked more strictly.
	}
	return nil
}

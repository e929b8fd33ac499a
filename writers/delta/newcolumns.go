package delta

import (
	"sync"

	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// newColumns shares, within one Writer, the column mapping its stages
// give the columns they add, by logical name: two keys adding the same
// column give it one physical name and id (so both commit), two adding
// different ones give them different ids. Writers on other servers
// assign their own: of two servers adding the same column, the second to
// commit fails with a conflict and its replay takes the first's mapping.
type newColumns struct {
	mu     sync.Mutex
	byName map[string]deltalog.StructField
}

// maxNewColumns bounds newColumns (forgetting only loses sharing).
const maxNewColumns = 1024

// assign gives the columns of merged (s's rows against a table whose
// maxColumnId is maxID) that have no column mapping yet their mapping:
// the one s's earlier batches chose, else the one another stage of this
// Writer chose while its ids are still above maxID (not yet committed or
// taken by another writer), else new ids above both.
func (n *newColumns) assign(s *stage, merged *deltalog.Schema, maxID int64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	known := &deltalog.Schema{}
	if s.schema != "" {
		if prev, err := deltalog.ParseSchema(s.schema); err == nil {
			known.Fields = prev.Fields
		}
	}
	top := maxID
	for name, f := range n.byName {
		if id, _ := f.ColumnID(); id <= maxID {
			delete(n.byName, name) // committed, or its id taken meanwhile
			continue
		}
		known.Fields = append(known.Fields, f)
		top = max(top, deltalog.HighestColumnID(&deltalog.Schema{Fields: []deltalog.StructField{f}}))
	}
	var added []string
	for _, f := range merged.Fields {
		if _, ok := f.ColumnID(); !ok {
			added = append(added, f.Name)
		}
	}
	if len(added) == 0 {
		return nil
	}
	if _, err := deltalog.AssignColumnMapping(merged, known, top); err != nil {
		return err
	}
	if n.byName == nil || len(n.byName) >= maxNewColumns {
		n.byName = map[string]deltalog.StructField{}
	}
	for _, name := range added {
		n.byName[name], _ = merged.Field(name)
	}
	if s.mappedAfter == nil {
		s.mappedAfter = &maxID
	}
	return nil
}

package tablesink

import "github.com/quiver-ingest/quiver/writers"

// Modes describes how a sink's descriptors carry its planning mode (Delta
// upsert, Lance merge_insert): descriptors of that mode carry a plan,
// those of the other modes add files without one.
type Modes struct {
	Sink, Endpoint string
	Mode           string // the endpoint's mode
	PlanMode       string // the mode whose descriptors carry a plan
	Plan, Files    string // "an upsert plan", "files" (for messages)
}

// Check refuses, as ErrInvalid, the first of n descriptors precommitted in
// another mode than the endpoint's: of(i) reports whether descriptor i
// carries a plan and whether it adds files. Mixing them would publish
// files without the plan that wrote them, or a plan the endpoint does not
// make.
func (m Modes) Check(n int, of func(i int) (planned, adds bool)) error {
	planning := m.Mode == m.PlanMode
	for i := range n {
		switch planned, adds := of(i); {
		case planned && !planning:
			return writers.Errorf(writers.ErrInvalid, "%s: endpoint %q: descriptor %d holds %s but the endpoint's mode is %s: hand over only descriptors precommitted by this endpoint", m.Sink, m.Endpoint, i, m.Plan, m.Mode)
		case !planned && adds && planning:
			return writers.Errorf(writers.ErrInvalid, "%s: endpoint %q: descriptor %d adds %s without %s but the endpoint's mode is %s: hand over only descriptors precommitted by this endpoint", m.Sink, m.Endpoint, i, m.Files, m.Plan, m.Mode)
		}
	}
	return nil
}

// Sink is what a table sink's Writer implements beyond writers.Writer:
// it reports and checks the table's schema, checks descriptors before a
// commit and keeps precommitted files until one publishes them.
type Sink interface {
	writers.Writer
	writers.SchemaReporter
	writers.SchemaChecker
	writers.DescriptorChecker
	writers.PrecommitKeeper
}

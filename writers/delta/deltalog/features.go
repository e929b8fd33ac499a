package deltalog

import (
	"fmt"
	"slices"
	"strings"
)

// Highest legacy protocol versions this package understands; reader 3 and
// writer 7 mean "explicit feature lists".
const (
	maxReaderVersion = 3
	maxWriterVersion = 7
)

// featureRule says what Quiver does with a listed feature: ok reports
// whether the table (with this feature listed) is usable. A nil rule means
// "always supported"; the policy follows the Delta protocol's "Table
// Features" for a reader of logs and an append/whole-file overwrite writer
// (docs/delta.md, "Refused, and why").
type featureRule func(s *Snapshot) (ok bool, why string)

func always(*Snapshot) (bool, string) { return true, "" }

func never(why string) featureRule {
	return func(*Snapshot) (bool, string) { return false, why }
}

// refuseIfActive refuses the feature only when active reports it in use:
// "supported" (listed) is not "active".
func refuseIfActive(why string, active func(*Snapshot) bool) featureRule {
	return func(s *Snapshot) (bool, string) { return !active(s), why }
}

// readerRules covers features a reader must understand. deletionVectors is
// accepted: log replay keys files by (path, DV) and exposes each file's DV;
// a data reader must apply them (Add.DeletionVector).
var readerRules = map[string]featureRule{
	"deletionVectors":     always,
	"timestampNtz":        always,
	"vacuumProtocolCheck": always,
	"columnMapping":       columnMappingRule,
	"v2Checkpoint":        always, // V2 checkpoints and sidecars are read (checkpoint_v2.go)
	// The sink upcasts what it reads of files written before a type change.
	"typeWidening":             always,
	"typeWidening-preview":     always,
	"variantType":              never("the variant type is not implemented"),
	"variantType-preview":      never("the variant type is not implemented"),
	"variantShredding":         never("the variant type is not implemented"),
	"variantShredding-preview": never("the variant type is not implemented"),
	"catalogManaged":           never("commits of catalog-managed tables live in a catalog"),
}

// writerRules covers writer features; a writer must also satisfy every
// reader feature (it reads the log before writing).
var writerRules = map[string]featureRule{
	"appendOnly": always, // enforced per commit: see checkAppendOnly
	// Rows are checked against them (writers/delta/constraints.go);
	// CheckWritable refuses the ones Quiver cannot evaluate (Constraints).
	"invariants":       always,
	"checkConstraints": always,
	// Appends and whole-file overwrites never need cdc files.
	"changeDataFeed": always,
	"generatedColumns": refuseIfActive("a column has delta.generationExpression (values are not generated)",
		columnMetadataActive("delta.generationExpression")),
	"allowColumnDefaults": refuseIfActive("a column has CURRENT_DEFAULT (defaults are not filled in)",
		columnMetadataActive("CURRENT_DEFAULT")),
	"columnMapping": columnMappingRule,
	"identityColumns": func(s *Snapshot) (bool, string) { // values are generated (writers/delta/identity.go)
		if err := checkIdentityColumns(s); err != nil {
			return false, err.Error()
		}
		return true, ""
	},
	"deletionVectors":             always,           // upserts honour and write them (ReadDeletionVector, DeletionVectorFile)
	"typeWidening":                typeWideningRule, // rows are written in the widened type
	"typeWidening-preview":        typeWideningRule,
	"timestampNtz":                always,
	"domainMetadata":              always, // domains are preserved, never edited
	"rowTracking":                 always, // Commit assigns row ids (rowtracking.go); rewrites materialize them
	"v2Checkpoint":                always, // checkpoints written are V2 (WriteCheckpoint)
	"inCommitTimestamp":           always, // commitInfo.inCommitTimestamp is written when enabled
	"clustering":                  always, // stats follow delta.dataSkipping*, which Spark keeps covering the clustering columns; clusteringProvider is never set
	"vacuumProtocolCheck":         always,
	"checkpointProtection":        always, // log files and checkpoints are never deleted
	"materializePartitionColumns": never("partition columns are not written into data files"),
	"icebergCompatV1":             refuseIfActive("delta.enableIcebergCompatV1 is set", configTrue("delta.enableIcebergCompatV1")),
	"icebergCompatV2":             refuseIfActive("delta.enableIcebergCompatV2 is set", configTrue("delta.enableIcebergCompatV2")),
	"icebergCompatV3":             refuseIfActive("delta.enableIcebergCompatV3 is set", configTrue("delta.enableIcebergCompatV3")),
	"coordinatedCommits-preview":  never("commits are coordinated by an external service"),
}

// legacyWriterFeatures lists the features implied by writer versions 2..6.
var legacyWriterFeatures = [][]string{
	2: {"appendOnly", "invariants"},
	3: {"checkConstraints"},
	4: {"changeDataFeed", "generatedColumns"},
	5: {"columnMapping"},
	6: {"identityColumns"},
}

// CheckReadable reports whether Quiver can read the table of s: reader
// version ≤ 3 and every reader feature supported (legacy reader 2 implies
// columnMapping: mode none, name or id). Refusals wrap ErrUnsupported
// and name the feature and the table protocol.
func CheckReadable(s *Snapshot) error {
	p := s.Protocol
	if p.MinReaderVersion > maxReaderVersion || p.MinReaderVersion < 1 {
		return unsupported(p, "reader version", fmt.Sprint(p.MinReaderVersion), "Quiver reads reader versions 1 to 3")
	}
	for _, f := range readerFeatures(p) {
		if err := checkFeature(s, "reader", f, readerRules); err != nil {
			return err
		}
	}
	return nil
}

// CheckWritable reports whether Quiver can append to or overwrite the table
// of s: it must be readable (CheckReadable), have writer version ≤ 7, every
// writer feature, explicit or implied by a legacy version, supported or
// inactive, and every feature its schema needs (schemaFeatures) listed.
// Refusals wrap ErrUnsupported and name the feature; an unparsable schema
// is ErrCorrupt.
func CheckWritable(s *Snapshot) error {
	if err := CheckReadable(s); err != nil {
		return err
	}
	p := s.Protocol
	if p.MinWriterVersion > maxWriterVersion || p.MinWriterVersion < 1 {
		return unsupported(p, "writer version", fmt.Sprint(p.MinWriterVersion), "Quiver writes writer versions 1 to 7")
	}
	for _, f := range writerFeatures(p) {
		if err := checkFeature(s, "writer", f, writerRules); err != nil {
			return err
		}
	}
	schema, err := s.Metadata.Schema()
	if err != nil {
		return err
	}
	// Whether or not the protocol lists their features: rows must satisfy
	// them.
	if _, err := Constraints(&s.Metadata); err != nil {
		return fmt.Errorf("delta: unsupported %w (table protocol %d/%d; Quiver evaluates comparisons, AND, OR, NOT, IS [NOT] NULL, IN and BETWEEN over columns and literals: docs/delta.md, \"Constraints\"): %w",
			err, p.MinReaderVersion, p.MinWriterVersion, ErrUnsupported)
	}
	for _, f := range schemaFeatures(schema) {
		if !slices.Contains(readerFeatures(p), f) || !slices.Contains(writerFeatures(p), f) {
			return unsupported(p, "feature", f, fmt.Sprintf("the schema needs it but the protocol does not list it as a reader and writer feature, so readers such as delta-kernel-rs refuse the table: add it (Spark: ALTER TABLE … SET TBLPROPERTIES ('delta.feature.%s' = 'supported'))", f))
		}
	}
	return nil
}

// schemaFeatures lists the reader-writer features a schema needs:
// timestampNtz for a timestamp_ntz column at any depth.
func schemaFeatures(s *Schema) []string {
	if s.usesType("timestamp_ntz") {
		return []string{"timestampNtz"}
	}
	return nil
}

// withFeatures returns p with the reader-writer features listed, and
// whether that changed it: reader 3 and writer 7, keeping every feature p
// lists or implies by a legacy version, as Delta upgrades a protocol.
func (p Protocol) withFeatures(features []string) (Protocol, bool) {
	reader, writer := slices.Clip(readerFeatures(p)), slices.Clip(writerFeatures(p))
	changed := false
	for _, f := range features {
		if !slices.Contains(reader, f) {
			reader, changed = append(reader, f), true
		}
		if !slices.Contains(writer, f) {
			writer, changed = append(writer, f), true
		}
	}
	if !changed {
		return p, false
	}
	return Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: reader, WriterFeatures: writer}, true
}

// withSchemaFeatures returns actions with the protocol upgraded when their
// metaData's schema needs a feature the protocol (theirs, else read's)
// lacks: Delta wants the upgrade in the commit that brings the column.
// The caller's actions are not modified.
func withSchemaFeatures(read *Snapshot, actions []Action) []Action {
	mi := slices.IndexFunc(actions, func(a Action) bool { return a.MetaData != nil })
	if mi < 0 {
		return actions
	}
	schema, err := actions[mi].MetaData.Schema()
	if err != nil {
		return actions // CheckWritable refuses it
	}
	pi := slices.IndexFunc(actions, func(a Action) bool { return a.Protocol != nil })
	var p Protocol
	switch {
	case pi >= 0:
		p = *actions[pi].Protocol
	case read != nil:
		p = read.Protocol
	default:
		return actions // version 0 without a protocol: newIntent refuses it
	}
	up, changed := p.withFeatures(schemaFeatures(schema))
	if !changed {
		return actions
	}
	out := slices.Clone(actions)
	if pi >= 0 {
		out[pi] = Action{Protocol: &up}
		return out
	}
	return slices.Insert(out, mi, Action{Protocol: &up})
}

func checkFeature(s *Snapshot, kind, feature string, rules map[string]featureRule) error {
	rule, known := rules[feature]
	if !known {
		// A reader feature is always a writer feature too; the writer rules
		// then decide. Anything else is unknown to Quiver.
		if kind == "reader" {
			if _, ok := writerRules[feature]; ok {
				return nil
			}
		}
		return unsupported(s.Protocol, kind+" feature", feature, "Quiver does not implement it")
	}
	if ok, why := rule(s); !ok {
		return unsupported(s.Protocol, kind+" feature", feature, why)
	}
	return nil
}

func unsupported(p Protocol, what, name, why string) error {
	return fmt.Errorf("delta: unsupported Delta %s %q (table protocol %d/%d): %s: %w",
		what, name, p.MinReaderVersion, p.MinWriterVersion, why, ErrUnsupported)
}

func readerFeatures(p Protocol) []string {
	switch {
	case p.MinReaderVersion >= 3:
		return p.ReaderFeatures
	case p.MinReaderVersion == 2:
		return []string{"columnMapping"}
	}
	return nil
}

func writerFeatures(p Protocol) []string {
	if p.MinWriterVersion >= 7 {
		return p.WriterFeatures
	}
	var out []string
	for v := 2; v <= int(p.MinWriterVersion) && v < len(legacyWriterFeatures); v++ {
		out = append(out, legacyWriterFeatures[v]...)
	}
	return out
}

// HasWriterFeature reports whether feature is listed or implied by the
// protocol's writer version.
func (p Protocol) HasWriterFeature(feature string) bool {
	return slices.Contains(writerFeatures(p), feature)
}

// typeWideningRule accepts type changes of top-level columns, which the
// sink upcasts when it reads older files; a changed struct member, array
// element or map key or value (delta.typeChanges below the top level, or
// with a fieldPath) is refused.
func typeWideningRule(s *Snapshot) (bool, string) {
	const why = "a nested field's type was changed (delta.typeChanges on a struct member, array element or map entry); Quiver upcasts top-level columns only"
	schema, err := s.Metadata.Schema()
	if err != nil {
		return false, err.Error()
	}
	for _, f := range schema.Fields {
		if raw, ok := f.Metadata["delta.typeChanges"]; ok && strings.Contains(string(raw), `"fieldPath"`) {
			return false, why
		}
		nested := false
		f.Type.walk(func(t *DataType) {
			for _, m := range t.Fields {
				_, changed := m.Metadata["delta.typeChanges"]
				nested = nested || changed
			}
		})
		if nested {
			return false, why
		}
	}
	return true, ""
}

// columnMappingRule accepts the name and id modes (the sink writes and
// reads data files by physical name with field ids) when the schema's
// column mapping metadata is complete.
func columnMappingRule(s *Snapshot) (bool, string) {
	switch mode := ColumnMappingMode(s.Metadata.Configuration); mode {
	case "none":
		return true, ""
	case "name", "id":
		if err := checkColumnMapping(s); err != nil {
			return false, err.Error()
		}
		return true, ""
	default:
		return false, fmt.Sprintf("unknown %s %q", ColumnMappingModeKey, mode)
	}
}

func configTrue(key string) func(*Snapshot) bool {
	return func(s *Snapshot) bool { return strings.EqualFold(s.Metadata.Configuration[key], "true") }
}

// columnMetadataActive reports whether any field at any depth has a
// metadata key starting with prefix. An unparsable schema counts as active
// (refuse rather than guess).
func columnMetadataActive(prefix string) func(*Snapshot) bool {
	return func(s *Snapshot) bool {
		schema, err := s.Metadata.Schema()
		if err != nil {
			return true
		}
		found := false
		root := DataType{Name: "struct", Fields: schema.Fields}
		root.walk(func(t *DataType) {
			for _, f := range t.Fields {
				for k := range f.Metadata {
					found = found || strings.HasPrefix(k, prefix)
				}
			}
		})
		return found
	}
}

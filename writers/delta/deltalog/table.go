package deltalog

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"

	"github.com/quiver-ingest/quiver/writers"
)

// creatableConfig lists the delta.* table properties Create accepts: they
// need no table feature, or one Quiver writes (deletion vectors). Other
// delta.* keys would enable features Quiver does not write (column
// mapping, row tracking, …).
var creatableConfig = map[string]bool{
	"delta.enableDeletionVectors":           true,
	"delta.appendOnly":                      true,
	"delta.checkpointInterval":              true,
	"delta.logRetentionDuration":            true,
	"delta.deletedFileRetentionDuration":    true,
	"delta.setTransactionRetentionDuration": true,
	"delta.dataSkippingNumIndexedCols":      true,
	"delta.dataSkippingStatsColumns":        true,
	"delta.isolationLevel":                  true,
	"delta.checkpoint.writeStatsAsJson":     true,
	"delta.parquet.compression.codec":       true,
	"delta.checkpointPolicy":                true,
}

// NewTable returns the protocol and metaData actions of a new table (the
// content of version 0 besides commitInfo and any adds): schemaString from
// the Arrow schema (FromArrow), the given partition columns and
// configuration, a new UUID id and createdTime now. The protocol is (1,2),
// or (3,7) with table features when the table needs one: timestampNtz when
// a column is timestamp_ntz, deletionVectors when
// delta.enableDeletionVectors is "true".
// Errors wrap writers.ErrInvalid: unsupported column types, partition
// columns that are missing, nested or of a non-primitive type, every column
// partitioned, or a delta.* property that needs a table feature.
func NewTable(schema *arrow.Schema, partitionColumns []string, configuration map[string]string) ([]Action, error) {
	s, err := FromArrow(schema)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, c := range partitionColumns {
		f, ok := s.Field(c)
		switch {
		case !ok:
			return nil, writers.Errorf(writers.ErrInvalid, "delta: partition column %q is not a column of the schema; fix partition_by", c)
		case seen[c]:
			return nil, writers.Errorf(writers.ErrInvalid, "delta: partition column %q is listed twice; fix partition_by", c)
		case f.Type.Name == "struct" || f.Type.Name == "array" || f.Type.Name == "map" || f.Type.Name == "binary":
			return nil, writers.Errorf(writers.ErrInvalid, "delta: partition column %q has type %s; partition by a primitive column", c, f.Type)
		}
		seen[c] = true
	}
	if len(s.Fields) > 0 && len(partitionColumns) == len(s.Fields) {
		return nil, writers.Errorf(writers.ErrInvalid, "delta: every column is a partition column; keep at least one data column")
	}
	conf := map[string]string{}
	for k, v := range configuration {
		if strings.HasPrefix(k, "delta.") && !creatableConfig[k] {
			return nil, writers.Errorf(writers.ErrInvalid, "delta: table property %q needs a table feature Quiver does not write; remove it", k)
		}
		conf[k] = v
	}
	p := newProtocol(s, conf)
	created := time.Now().UnixMilli()
	m := Metadata{
		ID:               uuid.NewString(),
		Format:           Format{Provider: "parquet", Options: map[string]string{}},
		SchemaString:     s.String(),
		PartitionColumns: nonNilSlice(append([]string(nil), partitionColumns...)),
		Configuration:    conf,
		CreatedTime:      &created,
	}
	return []Action{{Protocol: &p}, {MetaData: &m}}, nil
}

// NewTableSnapshot returns the snapshot of the table NewTable describes
// before it exists: version -1, NewTable's protocol and metaData, no files
// and no txns. A writer plans a table's first commit against it (the
// table is created by the commit that publishes its first rows, never
// earlier); [Commit] with it as read writes version 0.
func NewTableSnapshot(schema *arrow.Schema, partitionColumns []string, configuration map[string]string) (*Snapshot, error) {
	actions, err := NewTable(schema, partitionColumns, configuration)
	if err != nil {
		return nil, err
	}
	s := newSnapshot()
	s.apply(-1, actions)
	return s, nil
}

// creation returns the actions of version 0 of s, a snapshot of a table
// not created yet: its protocol, its metaData unless actions carry one,
// then actions. A metaData in actions (a schema the rows widened) gets the
// protocol it needs.
func (s *Snapshot) creation(actions []Action) []Action {
	p := s.Protocol
	i := slices.IndexFunc(actions, func(a Action) bool { return a.MetaData != nil })
	if i < 0 {
		m := s.Metadata
		return append([]Action{{Protocol: &p}, {MetaData: &m}}, actions...)
	}
	if schema, err := actions[i].MetaData.Schema(); err == nil {
		p = newProtocol(schema, actions[i].MetaData.Configuration)
	}
	return append([]Action{{Protocol: &p}}, actions...)
}

// newProtocol returns the lowest protocol a new table with schema s and
// configuration conf needs: (1,2) without features, else (3,7) listing
// every feature in use (appendOnly too when the table is append-only, as
// (3,7) no longer implies it).
func newProtocol(s *Schema, conf map[string]string) Protocol {
	features := schemaFeatures(s)
	if strings.EqualFold(conf["delta.enableDeletionVectors"], "true") {
		features = append(features, "deletionVectors")
	}
	if len(features) == 0 {
		return Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	}
	writer := slices.Clone(features)
	if strings.EqualFold(conf["delta.appendOnly"], "true") {
		writer = append([]string{"appendOnly"}, writer...)
	}
	return Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: features, WriterFeatures: writer}
}

// partitionByParam renders partition columns the way Spark writes
// operationParameters.partitionBy: a JSON array inside a string.
func partitionByParam(cols []string) string {
	b, _ := json.Marshal(nonNilSlice(cols))
	return string(b)
}

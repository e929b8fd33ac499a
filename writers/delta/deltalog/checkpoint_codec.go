package deltalog

import "fmt"

// Conversion of checkpoint rows to actions (writing goes through Arrow:
// checkpoint_arrow.go). A row whose action lacks a required field
// (add/remove path, txn appId) is corrupt.

func (r *cpRow) action() (Action, error) {
	var a Action
	switch {
	case r.Add != nil && r.Add.Path != nil:
		c := r.Add
		a.Add = &Add{
			Path:                    *c.Path,
			PartitionValues:         nonNilMap(c.PartitionValues),
			Size:                    deref(c.Size),
			ModificationTime:        deref(c.ModificationTime),
			DataChange:              deref(c.DataChange),
			Stats:                   deref(c.Stats),
			Tags:                    stringMap(c.Tags),
			DeletionVector:          c.DeletionVector.action(),
			BaseRowID:               c.BaseRowID,
			DefaultRowCommitVersion: c.DefaultRowCommitVersion,
		}
	case r.Remove != nil && r.Remove.Path != nil:
		c := r.Remove
		a.Remove = &Remove{
			Path:                    *c.Path,
			DeletionTimestamp:       c.DeletionTimestamp,
			DataChange:              deref(c.DataChange),
			ExtendedFileMetadata:    deref(c.ExtendedFileMetadata),
			PartitionValues:         c.PartitionValues,
			Size:                    c.Size,
			DeletionVector:          c.DeletionVector.action(),
			BaseRowID:               c.BaseRowID,
			DefaultRowCommitVersion: c.DefaultRowCommitVersion,
		}
	case r.Txn != nil && r.Txn.AppID != nil:
		a.Txn = &Txn{AppID: *r.Txn.AppID, Version: deref(r.Txn.Version), LastUpdated: r.Txn.LastUpdated}
	case r.MetaData != nil:
		c := r.MetaData
		m := &Metadata{
			ID:               deref(c.ID),
			Name:             c.Name,
			Description:      c.Description,
			SchemaString:     deref(c.SchemaString),
			PartitionColumns: nonNilSlice(c.PartitionColumns),
			Configuration:    nonNilMap(stringMap(c.Configuration)),
			CreatedTime:      c.CreatedTime,
			Format:           Format{Provider: "parquet", Options: map[string]string{}},
		}
		if c.Format != nil {
			m.Format = Format{Provider: deref(c.Format.Provider), Options: nonNilMap(stringMap(c.Format.Options))}
		}
		a.MetaData = m
	case r.Protocol != nil:
		c := r.Protocol
		a.Protocol = &Protocol{
			MinReaderVersion: deref(c.MinReaderVersion),
			MinWriterVersion: deref(c.MinWriterVersion),
			ReaderFeatures:   c.ReaderFeatures,
			WriterFeatures:   c.WriterFeatures,
		}
	case r.DomainMetadata != nil && r.DomainMetadata.Domain != nil:
		c := r.DomainMetadata
		a.DomainMetadata = &DomainMetadata{Domain: *c.Domain, Configuration: deref(c.Configuration), Removed: deref(c.Removed)}
	case r.Add != nil, r.Remove != nil, r.Txn != nil, r.DomainMetadata != nil:
		return a, fmt.Errorf("checkpoint row without path/appId/domain: %w", ErrCorrupt)
	}
	return a, nil
}

func (d *cpDeletionVector) action() *DeletionVector {
	if d == nil || d.StorageType == nil {
		return nil
	}
	return &DeletionVector{
		StorageType:    *d.StorageType,
		PathOrInlineDv: deref(d.PathOrInlineDv),
		Offset:         d.Offset,
		SizeInBytes:    deref(d.SizeInBytes),
		Cardinality:    deref(d.Cardinality),
		MaxRowIndex:    d.MaxRowIndex,
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func nonNilMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}

func nonNilSlice(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// stringMap drops null values (tags and configuration have none in practice).
func stringMap(m map[string]*string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

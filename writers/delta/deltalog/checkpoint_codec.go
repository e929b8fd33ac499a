package deltalog

import "fmt"

// Conversions between checkpoint rows and actions. A row whose action
// lacks a required field (add/remove path, txn appId) is corrupt.

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

// checkpointRow converts a reconciled action to its checkpoint row
// (remove carries no stats/tags in checkpoints).
func checkpointRow(a Action) cpRow {
	switch {
	case a.Add != nil:
		c := a.Add
		return cpRow{Add: &cpAdd{
			Path:                    &c.Path,
			PartitionValues:         nonNilMap(c.PartitionValues),
			Size:                    &c.Size,
			ModificationTime:        &c.ModificationTime,
			DataChange:              &c.DataChange,
			Tags:                    ptrMap(c.Tags),
			DeletionVector:          cpDV(c.DeletionVector),
			BaseRowID:               c.BaseRowID,
			DefaultRowCommitVersion: c.DefaultRowCommitVersion,
			Stats:                   nilIfEmpty(c.Stats),
		}}
	case a.Remove != nil:
		c := a.Remove
		pv := c.PartitionValues
		if c.ExtendedFileMetadata {
			pv = nonNilMap(pv) // present, as extendedFileMetadata says
		}
		return cpRow{Remove: &cpRemove{
			Path:                    &c.Path,
			DeletionTimestamp:       c.DeletionTimestamp,
			DataChange:              &c.DataChange,
			ExtendedFileMetadata:    &c.ExtendedFileMetadata,
			PartitionValues:         pv,
			Size:                    c.Size,
			DeletionVector:          cpDV(c.DeletionVector),
			BaseRowID:               c.BaseRowID,
			DefaultRowCommitVersion: c.DefaultRowCommitVersion,
		}}
	case a.Txn != nil:
		return cpRow{Txn: &cpTxn{AppID: &a.Txn.AppID, Version: &a.Txn.Version, LastUpdated: a.Txn.LastUpdated}}
	case a.MetaData != nil:
		c := a.MetaData
		return cpRow{MetaData: &cpMetadata{
			ID:               &c.ID,
			Name:             c.Name,
			Description:      c.Description,
			Format:           &cpFormat{Provider: &c.Format.Provider, Options: ptrMap(nonNilMap(c.Format.Options))},
			SchemaString:     &c.SchemaString,
			PartitionColumns: nonNilSlice(c.PartitionColumns),
			Configuration:    ptrMap(nonNilMap(c.Configuration)),
			CreatedTime:      c.CreatedTime,
		}}
	case a.Protocol != nil:
		c := a.Protocol
		return cpRow{Protocol: &cpProtocol{
			MinReaderVersion: &c.MinReaderVersion,
			MinWriterVersion: &c.MinWriterVersion,
			ReaderFeatures:   c.ReaderFeatures,
			WriterFeatures:   c.WriterFeatures,
		}}
	case a.DomainMetadata != nil:
		c := a.DomainMetadata
		return cpRow{DomainMetadata: &cpDomainMetadata{Domain: &c.Domain, Configuration: &c.Configuration, Removed: &c.Removed}}
	}
	return cpRow{}
}

func cpDV(d *DeletionVector) *cpDeletionVector {
	if d == nil {
		return nil
	}
	return &cpDeletionVector{
		StorageType:    &d.StorageType,
		PathOrInlineDv: &d.PathOrInlineDv,
		Offset:         d.Offset,
		SizeInBytes:    &d.SizeInBytes,
		Cardinality:    &d.Cardinality,
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

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
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

func ptrMap(m map[string]string) map[string]*string {
	if m == nil {
		return nil
	}
	out := make(map[string]*string, len(m))
	for k, v := range m {
		out[k] = &v
	}
	return out
}

package deltalog

import "strconv"

// Action is one line of a commit: exactly one field is set. Lines whose
// only key is one this package does not model (cdc, checkpointMetadata,
// sidecar, future actions) decode to an Action with every field nil and are
// skipped by DecodeCommit. Unknown fields inside known actions are ignored.
type Action struct {
	CommitInfo     *CommitInfo     `json:"commitInfo,omitempty"`
	Protocol       *Protocol       `json:"protocol,omitempty"`
	MetaData       *Metadata       `json:"metaData,omitempty"`
	Txn            *Txn            `json:"txn,omitempty"`
	DomainMetadata *DomainMetadata `json:"domainMetadata,omitempty"`
	Add            *Add            `json:"add,omitempty"`
	Remove         *Remove         `json:"remove,omitempty"`
}

func (a Action) empty() bool {
	return a.CommitInfo == nil && a.Protocol == nil && a.MetaData == nil && a.Txn == nil &&
		a.DomainMetadata == nil && a.Add == nil && a.Remove == nil
}

// Protocol is the table's reader/writer requirements.
// ReaderFeatures exists only at reader version 3, WriterFeatures only at
// writer version 7.
type Protocol struct {
	MinReaderVersion int32    `json:"minReaderVersion"`
	MinWriterVersion int32    `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
}

// Format is metaData.format.
type Format struct {
	Provider string            `json:"provider"`
	Options  map[string]string `json:"options"`
}

// Metadata is the metaData action. A new one replaces the previous one
// entirely. SchemaString is kept verbatim so column metadata Quiver does not
// understand survives a metadata rewrite; ParseSchema decodes it.
type Metadata struct {
	ID               string            `json:"id"`
	Name             *string           `json:"name"`
	Description      *string           `json:"description"`
	Format           Format            `json:"format"`
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	Configuration    map[string]string `json:"configuration"`
	CreatedTime      *int64            `json:"createdTime,omitempty"`
}

// Schema parses SchemaString.
func (m *Metadata) Schema() (*Schema, error) { return ParseSchema(m.SchemaString) }

// DeletionVector describes rows of a data file marked deleted.
type DeletionVector struct {
	StorageType    string `json:"storageType"`
	PathOrInlineDv string `json:"pathOrInlineDv"`
	Offset         *int32 `json:"offset,omitempty"`
	SizeInBytes    int32  `json:"sizeInBytes"`
	Cardinality    int64  `json:"cardinality"`
	MaxRowIndex    *int64 `json:"maxRowIndex,omitempty"`
}

// UniqueID is the DV part of a logical file's key: storageType +
// pathOrInlineDv (+ "@" + offset).
func (d *DeletionVector) UniqueID() string {
	if d == nil {
		return ""
	}
	id := d.StorageType + d.PathOrInlineDv
	if d.Offset != nil {
		id += "@" + strconv.Itoa(int(*d.Offset))
	}
	return id
}

// Add makes a data file live. Path is URI-encoded relative to the table root
// (DecodePath gives the storage key). PartitionValues maps every partition
// column to its serialized value, nil for null (FormatPartitionValue).
// Stats is the statistics JSON string (BuildStats, ParseStats).
type Add struct {
	Path                    string             `json:"path"`
	PartitionValues         map[string]*string `json:"partitionValues"`
	Size                    int64              `json:"size"`
	ModificationTime        int64              `json:"modificationTime"`
	DataChange              bool               `json:"dataChange"`
	Stats                   string             `json:"stats,omitempty"`
	Tags                    map[string]string  `json:"tags,omitempty"`
	DeletionVector          *DeletionVector    `json:"deletionVector,omitempty"`
	BaseRowID               *int64             `json:"baseRowId,omitempty"`
	DefaultRowCommitVersion *int64             `json:"defaultRowCommitVersion,omitempty"`
	ClusteringProvider      string             `json:"clusteringProvider,omitempty"`
}

// Key is the logical-file key (path + deletion-vector id) used by log replay.
func (a *Add) Key() string { return fileKey(a.Path, a.DeletionVector) }

// Remove builds the remove action for this live file, copying what the
// protocol recommends, with extendedFileMetadata set.
func (a *Add) Remove(deletionTimestamp int64, dataChange bool) *Remove {
	size := a.Size
	return &Remove{
		Path:                    a.Path,
		DeletionTimestamp:       &deletionTimestamp,
		DataChange:              dataChange,
		ExtendedFileMetadata:    true,
		PartitionValues:         a.PartitionValues,
		Size:                    &size,
		Stats:                   a.Stats,
		Tags:                    a.Tags,
		DeletionVector:          a.DeletionVector,
		BaseRowID:               a.BaseRowID,
		DefaultRowCommitVersion: a.DefaultRowCommitVersion,
	}
}

// Remove tombstones a data file (same path and deletion vector as its add).
type Remove struct {
	Path                    string             `json:"path"`
	DeletionTimestamp       *int64             `json:"deletionTimestamp,omitempty"`
	DataChange              bool               `json:"dataChange"`
	ExtendedFileMetadata    bool               `json:"extendedFileMetadata,omitempty"`
	PartitionValues         map[string]*string `json:"partitionValues,omitzero"`
	Size                    *int64             `json:"size,omitempty"`
	Stats                   string             `json:"stats,omitempty"`
	Tags                    map[string]string  `json:"tags,omitempty"`
	DeletionVector          *DeletionVector    `json:"deletionVector,omitempty"`
	BaseRowID               *int64             `json:"baseRowId,omitempty"`
	DefaultRowCommitVersion *int64             `json:"defaultRowCommitVersion,omitempty"`
}

// Key is the logical-file key (path + deletion-vector id).
func (r *Remove) Key() string { return fileKey(r.Path, r.DeletionVector) }

func fileKey(path string, dv *DeletionVector) string {
	if dv == nil {
		return path
	}
	return path + "\x00" + dv.UniqueID()
}

// Txn is an application transaction marker (SetTransaction): the snapshot
// keeps the latest Version per AppID.
type Txn struct {
	AppID       string `json:"appId"`
	Version     int64  `json:"version"`
	LastUpdated *int64 `json:"lastUpdated,omitempty"`
}

// CommitInfo is free-form provenance; only the fields Quiver writes or
// conflict checks read are modelled, other fields are ignored on read.
type CommitInfo struct {
	Timestamp           int64             `json:"timestamp"`
	InCommitTimestamp   *int64            `json:"inCommitTimestamp,omitempty"`
	Operation           string            `json:"operation,omitempty"`
	OperationParameters map[string]any    `json:"operationParameters,omitempty"`
	ReadVersion         *int64            `json:"readVersion,omitempty"`
	IsolationLevel      string            `json:"isolationLevel,omitempty"`
	IsBlindAppend       *bool             `json:"isBlindAppend,omitempty"`
	OperationMetrics    map[string]any    `json:"operationMetrics,omitempty"`
	EngineInfo          string            `json:"engineInfo,omitempty"`
	TxnID               string            `json:"txnId,omitempty"`
	Tags                map[string]string `json:"tags,omitempty"`
}

// DomainMetadata is per-domain configuration; the latest action per Domain
// wins and Removed tombstones it.
type DomainMetadata struct {
	Domain        string `json:"domain"`
	Configuration string `json:"configuration"`
	Removed       bool   `json:"removed"`
}

package deltalog

// Row types of a classic (V1) checkpoint, Spark 3.x layout
// (the Delta protocol, "Checkpoint Schema"): every field optional, one action per row, maps as
// key_value groups, lists 3-level. parquet-go reads checkpoints into them,
// matching columns by name, so checkpoints missing some columns (or
// carrying extra ones such as stats_parsed and partitionValues_parsed)
// read fine. Quiver writes checkpoints from Arrow (cpSchema in
// checkpoint_arrow.go, which mirrors these types).

type cpRow struct {
	Txn            *cpTxn            `parquet:"txn,optional"`
	Add            *cpAdd            `parquet:"add,optional"`
	Remove         *cpRemove         `parquet:"remove,optional"`
	MetaData       *cpMetadata       `parquet:"metaData,optional"`
	Protocol       *cpProtocol       `parquet:"protocol,optional"`
	DomainMetadata *cpDomainMetadata `parquet:"domainMetadata,optional"`
}

type cpTxn struct {
	AppID       *string `parquet:"appId,optional"`
	Version     *int64  `parquet:"version,optional"`
	LastUpdated *int64  `parquet:"lastUpdated,optional"`
}

type cpDeletionVector struct {
	StorageType    *string `parquet:"storageType,optional"`
	PathOrInlineDv *string `parquet:"pathOrInlineDv,optional"`
	Offset         *int32  `parquet:"offset,optional"`
	SizeInBytes    *int32  `parquet:"sizeInBytes,optional"`
	Cardinality    *int64  `parquet:"cardinality,optional"`
	MaxRowIndex    *int64  `parquet:"maxRowIndex,optional"`
}

type cpAdd struct {
	Path                    *string            `parquet:"path,optional"`
	PartitionValues         map[string]*string `parquet:"partitionValues,optional"`
	Size                    *int64             `parquet:"size,optional"`
	ModificationTime        *int64             `parquet:"modificationTime,optional"`
	DataChange              *bool              `parquet:"dataChange,optional"`
	Tags                    map[string]*string `parquet:"tags,optional"`
	DeletionVector          *cpDeletionVector  `parquet:"deletionVector,optional"`
	BaseRowID               *int64             `parquet:"baseRowId,optional"`
	DefaultRowCommitVersion *int64             `parquet:"defaultRowCommitVersion,optional"`
	Stats                   *string            `parquet:"stats,optional"`
}

type cpRemove struct {
	Path                    *string            `parquet:"path,optional"`
	DeletionTimestamp       *int64             `parquet:"deletionTimestamp,optional"`
	DataChange              *bool              `parquet:"dataChange,optional"`
	ExtendedFileMetadata    *bool              `parquet:"extendedFileMetadata,optional"`
	PartitionValues         map[string]*string `parquet:"partitionValues,optional"`
	Size                    *int64             `parquet:"size,optional"`
	DeletionVector          *cpDeletionVector  `parquet:"deletionVector,optional"`
	BaseRowID               *int64             `parquet:"baseRowId,optional"`
	DefaultRowCommitVersion *int64             `parquet:"defaultRowCommitVersion,optional"`
}

type cpFormat struct {
	Provider *string            `parquet:"provider,optional"`
	Options  map[string]*string `parquet:"options,optional"`
}

type cpMetadata struct {
	ID               *string            `parquet:"id,optional"`
	Name             *string            `parquet:"name,optional"`
	Description      *string            `parquet:"description,optional"`
	Format           *cpFormat          `parquet:"format,optional"`
	SchemaString     *string            `parquet:"schemaString,optional"`
	PartitionColumns []string           `parquet:"partitionColumns,optional,list"`
	Configuration    map[string]*string `parquet:"configuration,optional"`
	CreatedTime      *int64             `parquet:"createdTime,optional"`
}

type cpProtocol struct {
	MinReaderVersion *int32   `parquet:"minReaderVersion,optional"`
	MinWriterVersion *int32   `parquet:"minWriterVersion,optional"`
	ReaderFeatures   []string `parquet:"readerFeatures,optional,list"`
	WriterFeatures   []string `parquet:"writerFeatures,optional,list"`
}

type cpDomainMetadata struct {
	Domain        *string `parquet:"domain,optional"`
	Configuration *string `parquet:"configuration,optional"`
	Removed       *bool   `parquet:"removed,optional"`
}

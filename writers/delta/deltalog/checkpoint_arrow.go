package deltalog

import (
	"bytes"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/parquetio"
)

// Classic checkpoints are written as Arrow records through parquetio, the
// Parquet writer of data files and OPTIMIZE, so that one writer decides
// how Quiver's Parquet is encoded (PLAIN or dictionary strings, never
// DELTA_LENGTH_BYTE_ARRAY, which Spark's vectorized reader refuses or
// garbles: SPARK-52240). cpSchema mirrors cpRow (checkpoint_schema.go),
// the reader's row type: same columns, names and types, every field
// nullable, list elements required (as parquet-go writes []string).

var (
	cpString     = arrow.BinaryTypes.String
	cpInt32      = arrow.PrimitiveTypes.Int32
	cpInt64      = arrow.PrimitiveTypes.Int64
	cpBool       = arrow.FixedWidthTypes.Boolean
	cpStringMap  = arrow.MapOf(cpString, cpString) // values nullable
	cpStringList = arrow.ListOfNonNullable(cpString)

	cpDeletionVectorType = arrow.StructOf(
		cpField("storageType", cpString),
		cpField("pathOrInlineDv", cpString),
		cpField("offset", cpInt32),
		cpField("sizeInBytes", cpInt32),
		cpField("cardinality", cpInt64),
		cpField("maxRowIndex", cpInt64),
	)

	cpSchema = arrow.NewSchema([]arrow.Field{
		cpField("txn", arrow.StructOf(
			cpField("appId", cpString),
			cpField("version", cpInt64),
			cpField("lastUpdated", cpInt64),
		)),
		cpField("add", arrow.StructOf(
			cpField("path", cpString),
			cpField("partitionValues", cpStringMap),
			cpField("size", cpInt64),
			cpField("modificationTime", cpInt64),
			cpField("dataChange", cpBool),
			cpField("tags", cpStringMap),
			cpField("deletionVector", cpDeletionVectorType),
			cpField("baseRowId", cpInt64),
			cpField("defaultRowCommitVersion", cpInt64),
			cpField("stats", cpString),
		)),
		cpField("remove", arrow.StructOf(
			cpField("path", cpString),
			cpField("deletionTimestamp", cpInt64),
			cpField("dataChange", cpBool),
			cpField("extendedFileMetadata", cpBool),
			cpField("partitionValues", cpStringMap),
			cpField("size", cpInt64),
			cpField("deletionVector", cpDeletionVectorType),
			cpField("baseRowId", cpInt64),
			cpField("defaultRowCommitVersion", cpInt64),
		)),
		cpField("metaData", arrow.StructOf(
			cpField("id", cpString),
			cpField("name", cpString),
			cpField("description", cpString),
			cpField("format", arrow.StructOf(
				cpField("provider", cpString),
				cpField("options", cpStringMap),
			)),
			cpField("schemaString", cpString),
			cpField("partitionColumns", cpStringList),
			cpField("configuration", cpStringMap),
			cpField("createdTime", cpInt64),
		)),
		cpField("protocol", arrow.StructOf(
			cpField("minReaderVersion", cpInt32),
			cpField("minWriterVersion", cpInt32),
			cpField("readerFeatures", cpStringList),
			cpField("writerFeatures", cpStringList),
		)),
		cpField("domainMetadata", arrow.StructOf(
			cpField("domain", cpString),
			cpField("configuration", cpString),
			cpField("removed", cpBool),
		)),
	}, nil)
)

func cpField(name string, t arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: t, Nullable: true}
}

// Top-level columns of cpSchema.
const (
	cpTxnCol = iota
	cpAddCol
	cpRemoveCol
	cpMetaDataCol
	cpProtocolCol
	cpDomainMetadataCol
	cpColumns
)

// checkpointBatchRows bounds the actions of one Arrow record: a string
// column's 32-bit offsets must not overflow (a million files with 2 KB of
// stats each are 2 GB of add.stats), and a table's actions need not be
// copied into Arrow buffers all at once.
const checkpointBatchRows = 16384

// encodeClassicCheckpoint encodes actions, one row each (a remove without
// its stats and tags), as a snappy-compressed classic checkpoint; the
// Arrow data is allocated from mem and released before it returns.
func encodeClassicCheckpoint(mem memory.Allocator, actions []Action) ([]byte, error) {
	var buf bytes.Buffer
	w, err := parquetio.NewWriter(&buf, cpSchema, parquetio.Options{Compression: parquetio.CompressionSnappy})
	if err != nil {
		return nil, err
	}
	for lo := 0; lo < len(actions) && err == nil; lo += checkpointBatchRows {
		rec := checkpointRecord(mem, actions[lo:min(lo+checkpointBatchRows, len(actions))])
		err = w.Write(rec)
		rec.Release()
	}
	if _, cerr := w.Close(); err == nil { // after a Write error, Close repeats it
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkpointRecord builds the record batch of actions: in each row the
// column of the action's kind is set, the others are null.
func checkpointRecord(mem memory.Allocator, actions []Action) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, cpSchema)
	defer b.Release()
	cols := make([]*array.StructBuilder, cpColumns)
	for i := range cols {
		cols[i] = b.Field(i).(*array.StructBuilder)
		cols[i].Reserve(len(actions))
	}
	for _, a := range actions {
		kind := -1
		switch {
		case a.Txn != nil:
			kind = cpTxnCol
			appendTxn(cols[kind], a.Txn)
		case a.Add != nil:
			kind = cpAddCol
			appendAdd(cols[kind], a.Add)
		case a.Remove != nil:
			kind = cpRemoveCol
			appendRemove(cols[kind], a.Remove)
		case a.MetaData != nil:
			kind = cpMetaDataCol
			appendMetadata(cols[kind], a.MetaData)
		case a.Protocol != nil:
			kind = cpProtocolCol
			appendProtocol(cols[kind], a.Protocol)
		case a.DomainMetadata != nil:
			kind = cpDomainMetadataCol
			appendDomainMetadata(cols[kind], a.DomainMetadata)
		}
		for i, c := range cols {
			if i != kind {
				c.AppendNull()
			}
		}
	}
	return b.NewRecordBatch()
}

func appendTxn(b *array.StructBuilder, t *Txn) {
	b.Append(true)
	appendString(b, 0, t.AppID)
	appendInt64(b, 1, t.Version)
	appendOrNull(b.FieldBuilder(2).(*array.Int64Builder), t.LastUpdated)
}

func appendAdd(b *array.StructBuilder, a *Add) {
	b.Append(true)
	appendString(b, 0, a.Path)
	appendStringMap(b.FieldBuilder(1).(*array.MapBuilder), nonNilMap(a.PartitionValues))
	appendInt64(b, 2, a.Size)
	appendInt64(b, 3, a.ModificationTime)
	b.FieldBuilder(4).(*array.BooleanBuilder).Append(a.DataChange)
	appendStringMap(b.FieldBuilder(5).(*array.MapBuilder), ptrMap(a.Tags))
	appendDeletionVector(b.FieldBuilder(6).(*array.StructBuilder), a.DeletionVector)
	appendOrNull(b.FieldBuilder(7).(*array.Int64Builder), a.BaseRowID)
	appendOrNull(b.FieldBuilder(8).(*array.Int64Builder), a.DefaultRowCommitVersion)
	stats := b.FieldBuilder(9).(*array.StringBuilder)
	if a.Stats == "" {
		stats.AppendNull()
	} else {
		stats.Append(a.Stats)
	}
}

func appendRemove(b *array.StructBuilder, r *Remove) {
	b.Append(true)
	appendString(b, 0, r.Path)
	appendOrNull(b.FieldBuilder(1).(*array.Int64Builder), r.DeletionTimestamp)
	b.FieldBuilder(2).(*array.BooleanBuilder).Append(r.DataChange)
	b.FieldBuilder(3).(*array.BooleanBuilder).Append(r.ExtendedFileMetadata)
	pv := r.PartitionValues
	if r.ExtendedFileMetadata {
		pv = nonNilMap(pv) // present, as extendedFileMetadata says
	}
	appendStringMap(b.FieldBuilder(4).(*array.MapBuilder), pv)
	appendOrNull(b.FieldBuilder(5).(*array.Int64Builder), r.Size)
	appendDeletionVector(b.FieldBuilder(6).(*array.StructBuilder), r.DeletionVector)
	appendOrNull(b.FieldBuilder(7).(*array.Int64Builder), r.BaseRowID)
	appendOrNull(b.FieldBuilder(8).(*array.Int64Builder), r.DefaultRowCommitVersion)
}

func appendMetadata(b *array.StructBuilder, m *Metadata) {
	b.Append(true)
	appendString(b, 0, m.ID)
	appendOrNull(b.FieldBuilder(1).(*array.StringBuilder), m.Name)
	appendOrNull(b.FieldBuilder(2).(*array.StringBuilder), m.Description)
	format := b.FieldBuilder(3).(*array.StructBuilder)
	format.Append(true)
	appendString(format, 0, m.Format.Provider)
	appendStringMap(format.FieldBuilder(1).(*array.MapBuilder), ptrMap(nonNilMap(m.Format.Options)))
	appendString(b, 4, m.SchemaString)
	appendStringList(b.FieldBuilder(5).(*array.ListBuilder), nonNilSlice(m.PartitionColumns))
	appendStringMap(b.FieldBuilder(6).(*array.MapBuilder), ptrMap(nonNilMap(m.Configuration)))
	appendOrNull(b.FieldBuilder(7).(*array.Int64Builder), m.CreatedTime)
}

func appendProtocol(b *array.StructBuilder, p *Protocol) {
	b.Append(true)
	b.FieldBuilder(0).(*array.Int32Builder).Append(p.MinReaderVersion)
	b.FieldBuilder(1).(*array.Int32Builder).Append(p.MinWriterVersion)
	appendStringList(b.FieldBuilder(2).(*array.ListBuilder), p.ReaderFeatures)
	appendStringList(b.FieldBuilder(3).(*array.ListBuilder), p.WriterFeatures)
}

func appendDomainMetadata(b *array.StructBuilder, d *DomainMetadata) {
	b.Append(true)
	appendString(b, 0, d.Domain)
	appendString(b, 1, d.Configuration)
	b.FieldBuilder(2).(*array.BooleanBuilder).Append(d.Removed)
}

func appendDeletionVector(b *array.StructBuilder, d *DeletionVector) {
	if d == nil {
		b.AppendNull()
		return
	}
	b.Append(true)
	appendString(b, 0, d.StorageType)
	appendString(b, 1, d.PathOrInlineDv)
	appendOrNull(b.FieldBuilder(2).(*array.Int32Builder), d.Offset)
	b.FieldBuilder(3).(*array.Int32Builder).Append(d.SizeInBytes)
	appendInt64(b, 4, d.Cardinality)
	appendOrNull(b.FieldBuilder(5).(*array.Int64Builder), d.MaxRowIndex)
}

func appendString(b *array.StructBuilder, field int, v string) {
	b.FieldBuilder(field).(*array.StringBuilder).Append(v)
}

func appendInt64(b *array.StructBuilder, field int, v int64) {
	b.FieldBuilder(field).(*array.Int64Builder).Append(v)
}

// appendOrNull appends *v, or a null when v is nil.
func appendOrNull[T any](b interface {
	Append(T)
	AppendNull()
}, v *T) {
	if v == nil {
		b.AppendNull()
	} else {
		b.Append(*v)
	}
}

// appendStringMap appends m, keys sorted (the same state gives the same
// file); a nil map is a null.
func appendStringMap(b *array.MapBuilder, m map[string]*string) {
	if m == nil {
		b.AppendNull()
		return
	}
	b.Append(true)
	keys, items := b.KeyBuilder().(*array.StringBuilder), b.ItemBuilder().(*array.StringBuilder)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		keys.Append(k)
		appendOrNull(items, m[k])
	}
}

// appendStringList appends s; a nil slice is a null.
func appendStringList(b *array.ListBuilder, s []string) {
	if s == nil {
		b.AppendNull()
		return
	}
	b.Append(true)
	b.ValueBuilder().(*array.StringBuilder).AppendValues(s, nil)
}

// ptrMap returns m with its values as pointers (nil for nil).
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

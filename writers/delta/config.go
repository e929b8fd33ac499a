package delta

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/quiver-ingest/quiver/merge"
)

// Write modes (Config.WriteMode).
const (
	ModeAppend    = "append"
	ModeOverwrite = "overwrite"
	ModeUpsert    = "upsert"
)

// Schema evolution policies (Config.SchemaEvolution).
const (
	EvolveReject     = "reject"
	EvolveAddColumns = "add_columns"
)

// Parquet codecs (ParquetConfig.Compression).
const (
	CodecZstd   = "zstd"
	CodecSnappy = "snappy"
	CodecNone   = "none"
)

// Integer encodings of the data files (ParquetConfig.IntegerEncoding).
const (
	IntegersPlain = "plain"
	IntegersDelta = "delta_binary_packed"
)

// Config is one endpoint's `delta:` section. NewConfig holds every default;
// Validate names the offending key relative to the section.
type Config struct {
	// TableURI is the table root: file://, mem://, s3://, gs:// or
	// azblob://. Relative file:// paths resolve against the config
	// file's folder (writers.Env.ConfigDir).
	TableURI string `yaml:"table_uri"`
	// WriteMode is append (every commit adds files), overwrite (every
	// commit replaces the whole table) or upsert (every commit merges a
	// changelog by MergeKeys, copy-on-write; see upsert.go).
	WriteMode string `yaml:"mode"`
	// MergeKeys are upsert's key columns (required by upsert, refused
	// with the other modes). Partition columns may be keys, but at least
	// one key must be a data column.
	MergeKeys []string `yaml:"merge_keys"`
	// PartitionBy lists top-level columns that become Hive-style
	// directories and partitionValues. A new table is created with them;
	// an existing table must have exactly them.
	PartitionBy []string `yaml:"partition_by"`
	// SchemaEvolution is reject (every batch must match the table) or
	// add_columns (new nullable columns are added by the commit).
	SchemaEvolution string `yaml:"schema_evolution"`
	// TargetFileBytes rolls a data file once this many Parquet bytes are
	// written to it.
	TargetFileBytes int64 `yaml:"target_file_bytes"`
	// Parquet tunes the data files.
	Parquet ParquetConfig `yaml:"parquet"`
	// CheckpointInterval writes a checkpoint every this many versions
	// (the table's delta.checkpointInterval when it is created).
	CheckpointInterval int `yaml:"checkpoint_interval"`
	// DeletionVectors creates the table with deletion vectors enabled
	// (delta.enableDeletionVectors); an existing table must enable them.
	// Upserts into a table that enables them mark replaced rows in
	// deletion vectors instead of rewriting files (see upsert.go).
	DeletionVectors bool `yaml:"deletion_vectors"`
	// KeyIndexMaxBytes bounds the memory of upsert's per-file key
	// indexes (about 30 bytes per int64 key; 0 disables them).
	KeyIndexMaxBytes int64 `yaml:"key_index_max_bytes"`
}

// DefaultKeyIndexMaxBytes is key_index_max_bytes' default: 1 GiB, about
// 35 million int64 keys (a table of that many rows stays indexed).
const DefaultKeyIndexMaxBytes = 1 << 30

// ParquetConfig tunes the Parquet data files.
type ParquetConfig struct {
	// Compression is zstd, snappy or none.
	Compression string `yaml:"compression"`
	// RowGroupRows caps the rows of one row group.
	RowGroupRows int `yaml:"row_group_rows"`
	// IntegerEncoding is how integer, date and timestamp columns that are
	// not dictionary encoded are written: plain (what Spark and arrow-rs
	// write, every reader reads it) or delta_binary_packed (smaller files,
	// less encoding CPU; Spark 3.3 or newer, parquetio.Options.DeltaIntegers).
	IntegerEncoding string `yaml:"integer_encoding"`
}

// NewConfig returns the defaults of docs/delta.md, "Configuration": append, no partitions,
// reject schema changes, 128 MiB files, zstd, 131072-row row groups, a
// checkpoint every 10 versions, a 1 GiB upsert key index. TableURI has no
// default.
func NewConfig() *Config {
	return &Config{
		WriteMode:          ModeAppend,
		SchemaEvolution:    EvolveReject,
		TargetFileBytes:    128 << 20,
		Parquet:            ParquetConfig{Compression: CodecZstd, RowGroupRows: 128 << 10, IntegerEncoding: IntegersPlain},
		CheckpointInterval: 10,
		KeyIndexMaxBytes:   DefaultKeyIndexMaxBytes,
	}
}

// tableSchemes are the URI schemes writers/storage opens.
var tableSchemes = []string{"file", "mem", "s3", "gs", "azblob"}

// Validate checks every key and reports all problems, one per line, each
// starting with the key ("mode: ...").
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}

	if c.TableURI == "" {
		bad("table_uri", "required, e.g. file://./data/delta/events")
	} else if u, err := url.Parse(c.TableURI); err != nil {
		bad("table_uri", "%q is not a URI: %v", c.TableURI, err)
	} else if !slices.Contains(tableSchemes, u.Scheme) {
		bad("table_uri", "scheme %q is not supported: use one of %s", u.Scheme, strings.Join(tableSchemes, ", "))
	}

	switch c.WriteMode {
	case ModeAppend, ModeOverwrite:
		if len(c.MergeKeys) > 0 {
			bad("merge_keys", "only mode upsert uses merge keys: remove them or change mode")
		}
	case ModeUpsert:
		c.validateMergeKeys(bad)
	default:
		bad("mode", "%q is not a write mode: use append, overwrite or upsert", c.WriteMode)
	}

	seen := make(map[string]bool, len(c.PartitionBy))
	for i, col := range c.PartitionBy {
		switch low := strings.ToLower(col); {
		case col == "":
			bad("partition_by", "entry %d is empty: name a top-level column", i)
		case seen[low]:
			bad("partition_by", "column %q is listed twice (names are case-insensitive)", col)
		default:
			seen[low] = true
		}
	}

	switch c.SchemaEvolution {
	case EvolveReject, EvolveAddColumns:
	default:
		bad("schema_evolution", "%q is not a policy: use reject or add_columns", c.SchemaEvolution)
	}
	if c.TargetFileBytes <= 0 {
		bad("target_file_bytes", "%d: must be positive (default 134217728)", c.TargetFileBytes)
	}
	switch c.Parquet.Compression {
	case CodecZstd, CodecSnappy, CodecNone:
	default:
		bad("parquet.compression", "%q is not a codec: use zstd, snappy or none", c.Parquet.Compression)
	}
	if c.Parquet.RowGroupRows <= 0 {
		bad("parquet.row_group_rows", "%d: must be positive (default 131072)", c.Parquet.RowGroupRows)
	}
	switch c.Parquet.IntegerEncoding {
	case IntegersPlain, IntegersDelta:
	default:
		bad("parquet.integer_encoding", "%q is not an encoding: use plain or delta_binary_packed", c.Parquet.IntegerEncoding)
	}
	if c.CheckpointInterval <= 0 {
		bad("checkpoint_interval", "%d: must be positive (default 10)", c.CheckpointInterval)
	}
	if c.KeyIndexMaxBytes < 0 {
		bad("key_index_max_bytes", "%d: must be 0 (no key index) or positive (default %d)", c.KeyIndexMaxBytes, DefaultKeyIndexMaxBytes)
	}
	return errors.Join(errs...)
}

// validateMergeKeys checks merge_keys for mode upsert. That they are
// columns of the table is checked at the first write.
func (c *Config) validateMergeKeys(bad func(key, format string, args ...any)) {
	if len(c.MergeKeys) == 0 {
		bad("merge_keys", "required with mode upsert: list the key columns, e.g. [id]")
		return
	}
	data := 0
	for i, k := range c.MergeKeys {
		switch {
		case k == "":
			bad("merge_keys", "entry %d is empty: name a top-level column", i)
		case slices.Contains(c.MergeKeys[:i], k):
			bad("merge_keys", "column %q is listed twice", k)
		case merge.IsMetadataColumn(k):
			bad("merge_keys", "column %q is a changelog metadata column, which never reaches the table: key on data columns", k)
		case !slices.Contains(c.PartitionBy, k):
			data++
		}
	}
	if data == 0 {
		bad("merge_keys", "every key is a partition column: add at least one column that is not in partition_by")
	}
}

// Mode is the write mode shown by the endpoints listing.
func (c *Config) Mode() string { return c.WriteMode }

// Target is the table URI (writers.TargetOf removes credentials).
func (c *Config) Target() string { return c.TableURI }

package delta

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string // substring of the error, "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"overwrite", func(c *Config) { c.WriteMode = ModeOverwrite }, ""},
		{"partitioned", func(c *Config) { c.PartitionBy = []string{"day", "country"} }, ""},
		{"cloud", func(c *Config) { c.TableURI = "s3://bucket/events?region=eu-west-1" }, ""},
		{"no-uri", func(c *Config) { c.TableURI = "" }, "table_uri: required"},
		{"bad-scheme", func(c *Config) { c.TableURI = "hdfs://x/y" }, `table_uri: scheme "hdfs" is not supported`},
		{"upsert", func(c *Config) { c.WriteMode, c.MergeKeys = ModeUpsert, []string{"id", "day"} }, ""},
		{"upsert-no-keys", func(c *Config) { c.WriteMode = ModeUpsert }, "merge_keys: required with mode upsert"},
		{"upsert-dup-key", func(c *Config) { c.WriteMode, c.MergeKeys = ModeUpsert, []string{"id", "id"} }, `merge_keys: column "id" is listed twice`},
		{"upsert-op-key", func(c *Config) { c.WriteMode, c.MergeKeys = ModeUpsert, []string{"_op"} }, `merge_keys: column "_op" is a changelog metadata column`},
		{"upsert-partition-keys-only", func(c *Config) {
			c.WriteMode, c.MergeKeys, c.PartitionBy = ModeUpsert, []string{"day"}, []string{"day"}
		}, "merge_keys: every key is a partition column"},
		{"bad-mode", func(c *Config) { c.WriteMode = "merge" }, `mode: "merge" is not a write mode`},
		{"merge-keys", func(c *Config) { c.MergeKeys = []string{"id"} }, "merge_keys: only mode upsert"},
		{"dup-partition", func(c *Config) { c.PartitionBy = []string{"Day", "day"} }, `partition_by: column "day" is listed twice`},
		{"empty-partition", func(c *Config) { c.PartitionBy = []string{""} }, "partition_by: entry 0 is empty"},
		{"evolution", func(c *Config) { c.SchemaEvolution = "merge" }, `schema_evolution: "merge" is not a policy`},
		{"file-bytes", func(c *Config) { c.TargetFileBytes = 0 }, "target_file_bytes: 0: must be positive"},
		{"codec", func(c *Config) { c.Parquet.Compression = "lz4" }, `parquet.compression: "lz4" is not a codec`},
		{"row-group", func(c *Config) { c.Parquet.RowGroupRows = -1 }, "parquet.row_group_rows: -1: must be positive"},
		{"integers", func(c *Config) { c.Parquet.IntegerEncoding = "delta" }, `parquet.integer_encoding: "delta" is not an encoding`},
		{"checkpoint", func(c *Config) { c.CheckpointInterval = 0 }, "checkpoint_interval: 0: must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig("file://./data/delta/events", tc.change)
			err := cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestConfigReportsEveryProblem(t *testing.T) {
	cfg := &Config{}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("the zero Config validated")
	}
	lines := strings.Split(err.Error(), "\n")
	for _, key := range []string{"table_uri", "mode", "schema_evolution", "target_file_bytes", "parquet.compression", "parquet.row_group_rows", "parquet.integer_encoding", "checkpoint_interval"} {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, key+": ")
		}
		if !found {
			t.Errorf("no problem reported for %s in:\n%v", key, err)
		}
	}
}

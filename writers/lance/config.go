package lance

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Write modes (Config.WriteMode).
const (
	ModeAppend      = "append"
	ModeMergeInsert = "merge_insert"
)

// Config is one endpoint's `lance:` section. NewConfig holds every
// default; Validate names the offending key relative to the section.
type Config struct {
	// DatasetURI is the dataset root (the <name>.lance folder): file://,
	// mem://, s3://, gs:// or azblob://. Relative file:// paths resolve
	// against the config file's folder.
	DatasetURI string `yaml:"dataset_uri"`
	// WriteMode is append or merge_insert.
	WriteMode string `yaml:"mode"`
	// On lists merge_insert's key columns.
	On []string `yaml:"on"`
	// WhenMatched is update_all, do_nothing, fail or delete (merge_insert).
	WhenMatched string `yaml:"when_matched"`
	// WhenNotMatched is insert_all or do_nothing (merge_insert).
	WhenNotMatched string `yaml:"when_not_matched"`
	// WhenNotMatchedBySource is keep or delete (merge_insert).
	WhenNotMatchedBySource string `yaml:"when_not_matched_by_source"`
	// SourceDuplicates is fail or first_seen (merge_insert).
	SourceDuplicates string `yaml:"source_duplicates"`
	// KeyIndexMaxBytes bounds the merge_insert key index (33-38 bytes
	// per int64 key); past it, merges scan the key columns instead. 0
	// disables the index.
	KeyIndexMaxBytes int64 `yaml:"key_index_max_bytes"`
	// DataStorageVersion is the Lance file format of a dataset Quiver
	// creates: "2.2" (pylance's and LanceDB PyPI's default), "2.1"
	// (LanceDB npm's) or "2.0". Empty (the default) is 2.2; 2.0 stores
	// what Quiver's 2.1/2.2 writer refuses (values over 8 KiB, very
	// sparse lists). An existing dataset keeps its own.
	DataStorageVersion string `yaml:"data_storage_version"`
}

// DefaultKeyIndexMaxBytes is key_index_max_bytes' default: 1 GiB, 28-32
// million int64 keys.
const DefaultKeyIndexMaxBytes = 1 << 30

// NewConfig returns the defaults of docs/lance.md, "Config": append; for
// merge_insert update_all, insert_all, keep, fail. DatasetURI has none.
func NewConfig() *Config {
	return &Config{
		WriteMode:              ModeAppend,
		WhenMatched:            "update_all",
		WhenNotMatched:         "insert_all",
		WhenNotMatchedBySource: "keep",
		SourceDuplicates:       "fail",
		KeyIndexMaxBytes:       DefaultKeyIndexMaxBytes,
	}
}

var datasetSchemes = []string{"file", "mem", "s3", "gs", "azblob"}

// Validate checks every key and reports all problems, one per line, each
// starting with the key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.DatasetURI == "" {
		bad("dataset_uri", "required, e.g. file://./data/lance/items")
	} else if u, err := url.Parse(c.DatasetURI); err != nil {
		bad("dataset_uri", "%q is not a URI: %v", c.DatasetURI, err)
	} else if !slices.Contains(datasetSchemes, u.Scheme) {
		bad("dataset_uri", "scheme %q is not supported: use one of %s", u.Scheme, strings.Join(datasetSchemes, ", "))
	}
	oneOf := func(key, v string, allowed ...string) {
		if !slices.Contains(allowed, v) {
			bad(key, "%q is not allowed: use %s", v, strings.Join(allowed, " or "))
		}
	}
	if c.DataStorageVersion != "" {
		oneOf("data_storage_version", c.DataStorageVersion, "2.0", "2.1", "2.2")
	}
	oneOf("when_matched", c.WhenMatched, "update_all", "do_nothing", "fail", "delete")
	oneOf("when_not_matched", c.WhenNotMatched, "insert_all", "do_nothing")
	oneOf("when_not_matched_by_source", c.WhenNotMatchedBySource, "keep", "delete")
	oneOf("source_duplicates", c.SourceDuplicates, "fail", "first_seen")
	if c.KeyIndexMaxBytes < 0 {
		bad("key_index_max_bytes", "%d is negative: use 0 to disable the key index", c.KeyIndexMaxBytes)
	}
	for i, col := range c.On {
		if col == "" {
			bad("on", "entry %d is empty: name a key column", i)
		}
	}
	switch c.WriteMode {
	case ModeAppend:
		if len(c.On) > 0 {
			bad("on", "only mode merge_insert uses key columns: remove them or change mode")
		}
	case ModeMergeInsert:
		if len(c.On) == 0 {
			bad("on", "mode merge_insert needs the key columns to match on, e.g. on: [id]")
		}
		if dup := firstDuplicate(c.On); dup != "" {
			bad("on", "column %q is listed twice", dup)
		}
	default:
		bad("mode", "%q is not a write mode: use append or merge_insert", c.WriteMode)
	}
	return errors.Join(errs...)
}

// Mode is the write mode shown by the endpoints listing.
func (c *Config) Mode() string { return c.WriteMode }

// Target is the dataset URI (writers.TargetOf removes credentials).
func (c *Config) Target() string { return c.DatasetURI }

func firstDuplicate(names []string) string {
	for i, n := range names {
		if slices.Contains(names[:i], n) {
			return n
		}
	}
	return ""
}

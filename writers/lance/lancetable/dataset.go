package lancetable

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// ErrNoDataset reports a root without any manifest. It wraps
// writers.ErrNotFound.
var ErrNoDataset = fmt.Errorf("lance: no dataset (no manifest in _versions/): %w", writers.ErrNotFound)

// Writer identity recorded in every manifest Quiver writes. Lance accepts
// any library name; "lance" is avoided because readers key bug
// workarounds on lance versions.
const (
	WriterLibrary = "quiver"
	WriterVersion = "0.1.0"
	hintKey       = versionsDir + "latest_version_hint.json"
	txnDir        = "_transactions/"
	dataDir       = "data/"
)

// Dataset is one version of a Lance dataset: its manifest, the naming
// scheme of its _versions/ folder and the raw sections of its manifest
// file. It is immutable.
type Dataset struct {
	Manifest *Manifest
	Naming   Naming
	txn      []byte // inline transaction, or nil
	index    []byte // IndexSection protobuf, or nil
}

// Version is the dataset version.
func (d *Dataset) Version() uint64 { return d.Manifest.Version }

// HasIndexSection reports whether the version carries LanceDB indices.
func (d *Dataset) HasIndexSection() bool { return d.index != nil }

// listVersions returns every version in _versions/ and the naming scheme.
// Mixed schemes are refused, as Lance refuses them.
func listVersions(ctx context.Context, b *storage.Bucket) ([]uint64, Naming, error) {
	var (
		vs     []uint64
		naming Naming
		seen   = map[Naming]bool{}
	)
	for o, err := range b.List(ctx, versionsDir, "") {
		if err != nil {
			return nil, 0, fmt.Errorf("lance: list versions: %w", err)
		}
		v, n, ok := parseManifestName(path.Base(o.Key))
		if !ok || path.Dir(o.Key)+"/" != versionsDir {
			continue
		}
		vs = append(vs, v)
		naming = n
		seen[n] = true
	}
	if len(seen) > 1 {
		return nil, 0, writers.Errorf(writers.ErrInvalid, "lance: _versions/ mixes V1 and V2 manifest names, which Lance refuses too: repair the dataset with Lance")
	}
	return vs, naming, nil
}

// Versions returns every version in _versions/ and their naming scheme.
func Versions(ctx context.Context, b *storage.Bucket) ([]uint64, Naming, error) {
	return listVersions(ctx, b)
}

// latestRetries bounds how often Latest lists again when the newest
// version it listed was deleted before it could be read.
const latestRetries = 5

// Latest loads the newest version of the dataset under b, or ErrNoDataset.
// A version listed but gone when read (a vacuum, planned on a newer
// version, deleted it) makes it list again.
func Latest(ctx context.Context, b *storage.Bucket) (*Dataset, error) {
	for try := 1; ; try++ {
		vs, naming, err := listVersions(ctx, b)
		if err != nil {
			return nil, err
		}
		if len(vs) == 0 {
			return nil, ErrNoDataset
		}
		d, err := LoadVersion(ctx, b, slices.Max(vs), naming)
		if !errors.Is(err, storage.ErrNotExist) || try == latestRetries {
			return d, err
		}
	}
}

// LoadVersion loads version v. A missing manifest wraps
// storage.ErrNotExist; a corrupt one is an error naming the key.
func LoadVersion(ctx context.Context, b *storage.Bucket, v uint64, naming Naming) (*Dataset, error) {
	key := ManifestKey(v, naming)
	raw, err := b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("lance: read version %d: %w", v, err)
	}
	mf, err := decodeManifestFile(raw)
	if err != nil {
		return nil, fmt.Errorf("lance: manifest %s: %w", key, err)
	}
	if mf.m.Version != v {
		return nil, fmt.Errorf("lance: manifest %s says version %d", key, mf.m.Version)
	}
	return &Dataset{Manifest: mf.m, Naming: naming, txn: mf.txn, index: mf.index}, nil
}

// Transaction returns the transaction that produced this version (inline
// section or _transactions/ file), or nil when none is recorded.
func (d *Dataset) Transaction(ctx context.Context, b *storage.Bucket) (*Transaction, error) {
	raw := d.txn
	if raw == nil && d.Manifest.TxnFile != "" {
		var err error
		if raw, err = b.Get(ctx, txnDir+d.Manifest.TxnFile); err != nil {
			return nil, fmt.Errorf("lance: read transaction of version %d: %w", d.Version(), err)
		}
	}
	if raw == nil {
		return nil, nil
	}
	return DecodeTransaction(raw)
}

// CheckWritable reports, as ErrInvalid naming the reason and the way out,
// whether Quiver can append to this dataset: data storage version 2.0 to 2.2,
// no feature flags beyond deletion files and table config, one base path,
// no packed struct or blob columns (CheckLayouts).
func (d *Dataset) CheckWritable() error {
	m := d.Manifest
	flags := m.ReaderFlags | m.WriterFlags
	switch {
	case flags&FlagStableRowIDs != 0:
		return writers.Errorf(writers.ErrInvalid, "lance: the dataset uses stable row ids, which Quiver does not implement: write to a dataset created without new_table_enable_stable_row_ids")
	case flags&FlagMultiBasePaths != 0 || m.hasBasePaths():
		return writers.Errorf(writers.ErrInvalid, "lance: the dataset stores data under several base paths, which Quiver does not implement: write to a single-location dataset")
	case flags&FlagNoTxnFiles != 0:
		return writers.Errorf(writers.ErrInvalid, "lance: the dataset disables transaction files, which Quiver needs for exactly-once: re-enable them or use a new dataset")
	case flags&^uint64(FlagDeletionFiles|FlagTableConfig) != 0:
		return writers.Errorf(writers.ErrInvalid, "lance: the dataset has feature flags %#x that this Quiver does not know: use a Quiver built for this Lance version", flags)
	}
	if _, err := d.FileMinor(); err != nil {
		return err
	}
	if err := m.Schema.CheckLayouts(); err != nil {
		return err
	}
	for _, f := range m.Fragments {
		for _, df := range f.Files {
			if df.Major != 2 || df.Minor > 2 {
				return writers.Errorf(writers.ErrInvalid, "lance: data file %s is format %d.%d; Quiver reads and writes Lance file formats 2.0, 2.1 and 2.2", df.Path, df.Major, df.Minor)
			}
		}
	}
	return nil
}

// maxRebases bounds Commit's attempts to publish a version (it rebases
// over the concurrent commits between two).
const maxRebases = 32

// Commit publishes txn as the version after base (base nil: create the
// dataset as version 1, which txn must be an Overwrite for) and returns
// the new version. txn.ReadVersion and txn.UUID are filled in when zero.
//
// The transaction is written to _transactions/ and inline; the manifest
// is published put-if-absent. When another writer took the version, the
// winners' transactions are read: an Append rebases over Append, Delete,
// Update, CreateIndex, Rewrite, ReserveFragments, UpdateConfig and
// DataReplacement; an Update only over Append, CreateIndex,
// ReserveFragments and UpdateConfig, which never change an existing
// fragment (its replaced fragments would otherwise carry stale deletion
// files); a Rewrite over Append, ReserveFragments, UpdateConfig and the
// Deletes, Updates and Rewrites that changed none of its old fragments.
// All need an unchanged schema and retry on the new latest version;
// anything else, and a create losing to any version, is
// writers.ErrConflict, after which the caller re-checks its plan against
// the new version. The hint file is rewritten after the manifest, best
// effort (it must be written ahead like the others, though: a commit
// creating a dataset may create its folder).
//
// The transaction file, the manifest and the hint are prepared at once
// (storage.Prepare: on file://, their syncs overlap), then published in
// the order readers need: the transaction, the manifest that names it,
// the hint that names the manifest. A commit so waits for one round of
// overlapping file syncs (and folder creations) and three folder syncs,
// not six to eight syncs in a row.
//
// Errors: ErrConflict as above; ErrUnavailable when the files could not be
// written ahead (no version published; ErrInvalid for a key storage
// refuses); a failed manifest publication is classed by storage.Publish
// (outcome unknown only when a read cannot tell whether it landed).
func Commit(ctx context.Context, b *storage.Bucket, base *Dataset, txn *Transaction) (*Dataset, error) {
	naming := NamingV2
	if base != nil {
		naming = base.Naming
		txn.ReadVersion = base.Version()
	} else if txn.Op != OpOverwrite {
		return nil, fmt.Errorf("lance: creating a dataset needs an Overwrite transaction, not %s", opName(txn.Op))
	}
	if txn.UUID == "" {
		txn.UUID = uuid.NewString()
	}
	raw, err := txn.Encode()
	if err != nil {
		return nil, err
	}
	txnName := fmt.Sprintf("%d-%s.txn", txn.ReadVersion, txn.UUID)
	next, err := nextVersion(base, txn, txnName, raw, naming)
	if err != nil {
		return nil, err
	}
	var txnFile, manifest, hint *storage.Prepared
	defer func() { // unpublished ones
		txnFile.Discard()
		manifest.Discard()
		hint.Discard()
	}()
	// All three must be prepared, the hint too: on a dataset's creation
	// the first to reach a missing folder creates and syncs it for all.
	var g errgroup.Group
	g.Go(func() (err error) {
		txnFile, err = b.Prepare(ctx, txnDir+txnName, raw)
		return err
	})
	g.Go(func() (err error) {
		manifest, err = b.Prepare(ctx, next.key, next.file)
		return err
	})
	g.Go(func() (err error) {
		hint, err = b.Prepare(ctx, hintKey, hintOf(next.m.Version))
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, unpublished(err)
	}
	if err := txnFile.Put(ctx); err != nil {
		return nil, fmt.Errorf("lance: write transaction file: %w", err)
	}
	for attempt := 1; ; attempt++ {
		err := storage.PublishPrepared(ctx, manifest)
		switch {
		case err == nil:
			if hint == nil {
				writeHint(ctx, b, next.m.Version)
			} else {
				_ = hint.Put(ctx) // best effort
			}
			return &Dataset{Manifest: next.m, Naming: naming, txn: raw, index: next.index}, nil
		case !errors.Is(err, storage.ErrAlreadyExists):
			return nil, fmt.Errorf("lance: publish version %d: %w", next.m.Version, err)
		case base == nil:
			return nil, writers.Errorf(writers.ErrConflict, "lance: another writer created the dataset concurrently: retry against the existing dataset")
		case attempt == maxRebases:
			return nil, writers.Errorf(writers.ErrConflict, "lance: lost the commit race %d times: retry later", maxRebases)
		}
		if base, err = Rebase(ctx, b, base, txn); err != nil {
			return nil, err
		}
		if next, err = nextVersion(base, txn, txnName, raw, naming); err != nil {
			return nil, err
		}
		hint.Discard()
		hint = nil // written after the manifest: its version changed
		if manifest, err = b.Prepare(ctx, next.key, next.file); err != nil {
			return nil, unpublished(err)
		}
	}
}

// unpublished classes a failure to prepare a commit's files: no version
// was published, and trying again may succeed (unless storage refused
// the key itself).
func unpublished(err error) error {
	if errors.Is(err, writers.ErrInvalid) {
		return err
	}
	return writers.Errorf(writers.ErrUnavailable, "lance: write commit files: no version was published: %w", err)
}

// pendingVersion is a manifest ready to publish: the version after a base.
type pendingVersion struct {
	m     *Manifest
	key   string
	file  []byte
	index []byte // the base's index section, carried over
}

// nextVersion builds the manifest file of the version after base that
// applies txn (raw, written as txnName).
func nextVersion(base *Dataset, txn *Transaction, txnName string, raw []byte, naming Naming) (pendingVersion, error) {
	m, err := build(base, txn, txnName)
	if err != nil {
		return pendingVersion{}, err
	}
	var index []byte
	if base != nil {
		index = base.index
	}
	file, err := encodeManifestFile(m, raw, index)
	if err != nil {
		return pendingVersion{}, err
	}
	return pendingVersion{m: m, key: ManifestKey(m.Version, naming), file: file, index: index}, nil
}

// Rebase returns the latest version if txn may be applied on top of every
// version committed after base, else ErrConflict (also when one of those
// versions is gone, deleted by a vacuum since base was read: then
// nothing tells whether txn is compatible with it).
func Rebase(ctx context.Context, b *storage.Bucket, base *Dataset, txn *Transaction) (*Dataset, error) {
	latest, err := Latest(ctx, b)
	if err != nil {
		return nil, err
	}
	for v := base.Version() + 1; v <= latest.Version(); v++ {
		d, err := LoadVersion(ctx, b, v, latest.Naming)
		if errors.Is(err, storage.ErrNotExist) {
			return nil, writers.Errorf(writers.ErrConflict, "lance: version %d, committed after version %d this transaction read, was removed by a vacuum: plan the transaction again", v, base.Version())
		}
		if err != nil {
			return nil, err
		}
		other, err := d.Transaction(ctx, b)
		if err != nil {
			return nil, err
		}
		if other == nil {
			return nil, writers.Errorf(writers.ErrConflict, "lance: concurrent version %d records no transaction, so Quiver cannot tell whether its append is compatible: retry", v)
		}
		if !compatible(txn, other) {
			return nil, writers.Errorf(writers.ErrConflict, "lance: concurrent version %d (operation %s) is incompatible with this %s: retry the transaction", v, opName(other.Op), opName(txn.Op))
		}
		if txn.Concurrent != nil {
			if err := txn.Concurrent(other); err != nil {
				return nil, fmt.Errorf("lance: concurrent version %d: %w", v, err)
			}
		}
	}
	if !latest.Manifest.Schema.Equal(&base.Manifest.Schema) {
		return nil, writers.Errorf(writers.ErrConflict, "lance: the dataset schema changed concurrently (version %d): retry the transaction", latest.Version())
	}
	if err := latest.CheckWritable(); err != nil {
		return nil, err
	}
	return latest, nil
}

// compatible applies Lance's conflict rules from the side of mine (an
// Append, an Update or a Rewrite; see Commit). An Update conservatively
// conflicts with every operation that may change an existing fragment,
// without inspecting which fragments other touched; a Rewrite inspects
// them (rewriteCompatible).
func compatible(mine, other *Transaction) bool {
	switch mine.Op {
	case OpRewrite:
		return rewriteCompatible(mine, other)
	case OpAppend:
		switch other.Op {
		case OpAppend, OpDelete, OpUpdate, OpCreateIndex, OpRewrite, OpReserveFrags, OpUpdateConfig, OpDataReplacement:
			return true
		}
	case OpUpdate:
		switch other.Op {
		case OpAppend, OpCreateIndex, OpReserveFrags, OpUpdateConfig:
			return true
		}
	}
	return false
}

var opNames = map[protowire.Number]string{
	OpAppend: "Append", OpDelete: "Delete", OpOverwrite: "Overwrite", OpCreateIndex: "CreateIndex",
	OpRewrite: "Rewrite", OpMerge: "Merge", OpRestore: "Restore", OpReserveFrags: "ReserveFragments",
	OpUpdate: "Update", OpProject: "Project", OpUpdateConfig: "UpdateConfig", OpDataReplacement: "DataReplacement",
}

func opName(op protowire.Number) string {
	if n, ok := opNames[op]; ok {
		return n
	}
	return fmt.Sprintf("operation #%d", op)
}

// build makes the manifest of the version after base that applies txn.
func build(base *Dataset, txn *Transaction, txnName string) (*Manifest, error) {
	m := &Manifest{}
	if base != nil {
		cp := *base.Manifest
		m = &cp
	}
	m.Version++
	m.Timestamp = time.Now().UTC()
	m.TxnFile = txnName
	m.WriterLibrary, m.WriterVersion = WriterLibrary, WriterVersion
	m.FileFormat = "lance"
	if base == nil {
		// A new dataset's data storage version is its files' format.
		m.FormatVersion = formatOfFiles(txn.Fragments)
	}
	next := m.nextFragmentID()
	first := next
	switch txn.Op {
	case OpAppend:
		m.Fragments = append([]Fragment(nil), m.Fragments...)
	case OpOverwrite:
		if txn.Schema == nil {
			return nil, fmt.Errorf("lance: overwrite without a schema")
		}
		m.Schema = *txn.Schema
		m.Fragments = nil
	case OpUpdate:
		frags, err := applyUpdate(m.Fragments, txn)
		if err != nil {
			return nil, err
		}
		m.Fragments = frags
	case OpRewrite:
		frags, err := applyRewrite(m.Fragments, txn.Groups, &next)
		if err != nil {
			return nil, err
		}
		m.Fragments = frags
	default:
		return nil, fmt.Errorf("lance: Quiver does not build %s versions", opName(txn.Op))
	}
	for _, f := range txn.Fragments {
		f.ID = next
		next++
		m.Fragments = append(m.Fragments, f)
	}
	if next > first {
		if next-1 > math.MaxUint32 {
			return nil, writers.Errorf(writers.ErrInvalid, "lance: fragment id %d exceeds Lance's 32-bit max_fragment_id", next-1)
		}
		last := uint32(next - 1)
		m.MaxFragmentID = &last
	}
	m.ReaderFlags, m.WriterFlags = 0, 0
	for _, f := range m.Fragments {
		if f.Deletion != nil {
			m.ReaderFlags |= FlagDeletionFiles
			m.WriterFlags |= FlagDeletionFiles
		}
	}
	if m.hasConfig() {
		m.WriterFlags |= FlagTableConfig
	}
	return m, nil
}

// applyUpdate returns frags without txn's removed fragments and with its
// updated ones replaced by id. A removed or updated id that frags lacks is
// writers.ErrConflict: the fragment changed under the plan.
func applyUpdate(frags []Fragment, txn *Transaction) ([]Fragment, error) {
	byID := make(map[uint64]*Fragment, len(txn.Updated))
	for i := range txn.Updated {
		byID[txn.Updated[i].ID] = &txn.Updated[i]
	}
	out := make([]Fragment, 0, len(frags))
	found := 0
	for _, f := range frags {
		if slices.Contains(txn.Removed, f.ID) {
			found++
			continue
		}
		if u := byID[f.ID]; u != nil {
			found++
			f = *u
		}
		out = append(out, f)
	}
	if found != len(txn.Removed)+len(byID) {
		return nil, writers.Errorf(writers.ErrConflict, "lance: a fragment the update replaces or removes is no longer in the dataset: plan the merge again")
	}
	return out, nil
}

// writeHint rewrites _versions/latest_version_hint.json. Readers treat it
// as a lower bound, so a failure only costs them a listing.
func writeHint(ctx context.Context, b *storage.Bucket, v uint64) {
	_ = b.Put(ctx, hintKey, hintOf(v))
}

// hintOf is the hint file naming version v.
func hintOf(v uint64) []byte { return fmt.Appendf(nil, `{"version":%d}`, v) }

// DataKey returns the storage key of a data file path of a DataFile.
func DataKey(p string) string { return dataDir + p }

// NewDataFileName returns a fresh data file name (relative to data/).
func NewDataFileName() string {
	return strings.ReplaceAll(uuid.NewString(), "-", "") + ".lance"
}

// FileMinor returns the minor version of the file format the dataset
// stores (2.minor), or ErrInvalid naming why Quiver cannot write it.
func (d *Dataset) FileMinor() (uint16, error) {
	v := d.Manifest.FormatVersion
	if v == "" { // not recorded: the files' format
		v = formatOfFiles(d.Manifest.Fragments)
	}
	if v == "0.1" || v == "0.3" || v == "legacy" {
		return 0, writers.Errorf(writers.ErrInvalid, "lance: the dataset stores data in the legacy Lance file format (0.1); Quiver reads and writes 2.0, 2.1 and 2.2: rewrite the table with a newer Lance, or point Quiver at a new dataset")
	}
	minor, err := lancefile.ParseFormatVersion(v)
	if err != nil {
		return 0, writers.Errorf(writers.ErrInvalid, "lance: the dataset stores data in Lance file format %s, which this Quiver does not write (it writes 2.0, 2.1 and 2.2; newer versions are Lance's unstable \"next\" formats): write the table with data_storage_version \"2.2\", or point Quiver at a new dataset", v)
	}
	return minor, nil
}

// formatOfFiles is the data storage version of a dataset created with
// these fragments: their files' format (2.0 when there are none).
func formatOfFiles(frags []Fragment) string {
	for _, f := range frags {
		for _, df := range f.Files {
			return fmt.Sprintf("%d.%d", df.Major, df.Minor)
		}
	}
	return "2.0"
}

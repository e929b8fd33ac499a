package lancetable

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/tablepb"
)

// DataFile is one lance.table.DataFile: a data file of a fragment.
type DataFile struct {
	Path          string            // relative to data/
	Fields        []int32           // field ids stored in the file
	ColumnIndices []int32           // top-level column of each field (-1 none)
	Major, Minor  uint32            // 2/0 for format 2.0
	SizeBytes     uint64            // exact size, 0 = unknown
	pb            *tablepb.DataFile // decoded from; carried through
}

// Deletion file types (lance.table.DeletionFile.DeletionFileType).
const (
	DeletionArrow  = 0 // .arrow, one row_id UInt32 column
	DeletionBitmap = 1 // .bin, a portable 32-bit roaring bitmap
)

// DeletionFile is one lance.table.DeletionFile.
type DeletionFile struct {
	FileType       uint64
	ReadVersion    uint64
	ID             uint64
	NumDeletedRows uint64
	pb             *tablepb.DeletionFile // decoded from; carried through
}

// Path returns the deletion file's key relative to the dataset root.
func (d *DeletionFile) Path(fragmentID uint64) string {
	ext := "arrow"
	if d.FileType == DeletionBitmap {
		ext = "bin"
	}
	return fmt.Sprintf("_deletions/%d-%d-%d.%s", fragmentID, d.ReadVersion, d.ID, ext)
}

// Fragment is one lance.table.DataFragment.
type Fragment struct {
	ID           uint64
	Files        []DataFile
	Deletion     *DeletionFile
	PhysicalRows uint64
	pb           *tablepb.DataFragment // decoded from: row id sequences etc. carried through
}

// LiveRows is the number of rows not deleted.
func (f *Fragment) LiveRows() uint64 {
	if f.Deletion == nil {
		return f.PhysicalRows
	}
	return f.PhysicalRows - min(f.PhysicalRows, f.Deletion.NumDeletedRows)
}

func (d *DataFile) toPB() *tablepb.DataFile {
	m := lancefile.CloneOr(d.pb)
	m.Path = d.Path
	m.Fields, m.ColumnIndices = d.Fields, d.ColumnIndices
	m.FileMajorVersion, m.FileMinorVersion = d.Major, d.Minor
	m.FileSizeBytes = d.SizeBytes
	return m
}

func dataFileOf(m *tablepb.DataFile) DataFile {
	return DataFile{Path: m.Path, Fields: m.Fields, ColumnIndices: m.ColumnIndices,
		Major: m.FileMajorVersion, Minor: m.FileMinorVersion, SizeBytes: m.FileSizeBytes, pb: m}
}

func (d *DeletionFile) toPB() *tablepb.DeletionFile {
	m := lancefile.CloneOr(d.pb)
	m.FileType = tablepb.DeletionFile_DeletionFileType(d.FileType)
	m.ReadVersion, m.Id, m.NumDeletedRows = d.ReadVersion, d.ID, d.NumDeletedRows
	return m
}

func deletionFileOf(m *tablepb.DeletionFile) *DeletionFile {
	return &DeletionFile{FileType: uint64(m.FileType), ReadVersion: m.ReadVersion, ID: m.Id, NumDeletedRows: m.NumDeletedRows, pb: m}
}

func (fr *Fragment) toPB() *tablepb.DataFragment {
	m := lancefile.CloneOr(fr.pb)
	m.Id, m.PhysicalRows = fr.ID, fr.PhysicalRows
	m.Files = make([]*tablepb.DataFile, len(fr.Files))
	for i := range fr.Files {
		m.Files[i] = fr.Files[i].toPB()
	}
	m.DeletionFile = nil
	if fr.Deletion != nil {
		m.DeletionFile = fr.Deletion.toPB()
	}
	return m
}

func fragmentOf(m *tablepb.DataFragment) Fragment {
	fr := Fragment{ID: m.Id, PhysicalRows: m.PhysicalRows, Files: make([]DataFile, len(m.Files)), pb: m}
	for i, f := range m.Files {
		fr.Files[i] = dataFileOf(f)
	}
	if m.DeletionFile != nil {
		fr.Deletion = deletionFileOf(m.DeletionFile)
	}
	return fr
}

func fragmentsToPB(frags []Fragment) []*tablepb.DataFragment {
	out := make([]*tablepb.DataFragment, len(frags))
	for i := range frags {
		out[i] = frags[i].toPB()
	}
	return out
}

func fragmentsOf(ms []*tablepb.DataFragment) []Fragment {
	out := make([]Fragment, len(ms))
	for i, m := range ms {
		out[i] = fragmentOf(m)
	}
	return out
}

// Feature flags (Manifest.reader/writer_feature_flags).
const (
	FlagDeletionFiles  = 1
	FlagStableRowIDs   = 2
	FlagTableConfig    = 8
	FlagMultiBasePaths = 16
	FlagNoTxnFiles     = 32
)

// Manifest is one lance.table.Manifest (one dataset version).
type Manifest struct {
	Schema        lancefile.Schema
	Fragments     []Fragment
	Version       uint64
	Timestamp     time.Time
	ReaderFlags   uint64
	WriterFlags   uint64
	MaxFragmentID *uint32
	TxnFile       string // relative to _transactions/, or ""
	WriterLibrary string
	WriterVersion string
	FileFormat    string // data_format.file_format ("lance")
	FormatVersion string // data_format.version ("2.0")
	IndexSection  *uint64
	TxnSection    *uint64
	// pb is the message the manifest was decoded from: config,
	// table_metadata, base paths and fields unknown to Quiver are carried
	// into the next version.
	pb *tablepb.Manifest
}

func (m *Manifest) encode() ([]byte, error) {
	p := lancefile.CloneOr(m.pb)
	p.Fields, p.SchemaMetadata = m.Schema.ToPB(), m.Schema.Metadata
	p.Fragments = fragmentsToPB(m.Fragments)
	p.Version = m.Version
	p.IndexSection, p.TransactionSection = m.IndexSection, m.TxnSection
	p.Timestamp = timestamppb.New(m.Timestamp)
	p.ReaderFeatureFlags, p.WriterFeatureFlags = m.ReaderFlags, m.WriterFlags
	p.MaxFragmentId = m.MaxFragmentID
	p.TransactionFile = m.TxnFile
	p.WriterVersion = &tablepb.Manifest_WriterVersion{Library: m.WriterLibrary, Version: m.WriterVersion}
	p.DataFormat = &tablepb.Manifest_DataStorageFormat{FileFormat: m.FileFormat, Version: m.FormatVersion}
	return lancefile.Marshal(p)
}

func decodeManifest(msg []byte) (*Manifest, error) {
	p := &tablepb.Manifest{}
	if err := lancefile.Unmarshal(msg, p); err != nil {
		return nil, err
	}
	// Per-version data, never copied into the next version; next_row_id
	// only comes with stable row ids, which CheckWritable refuses.
	p.VersionAuxData, p.Tag, p.Branch, p.NextRowId = 0, "", nil, 0
	schema, err := lancefile.SchemaOf(p.Fields, p.SchemaMetadata)
	if err != nil {
		return nil, err
	}
	frags := fragmentsOf(p.Fragments)
	ids := make(map[uint64]bool, len(frags))
	for _, f := range frags {
		if ids[f.ID] {
			return nil, writers.Errorf(writers.ErrInvalid, "lance: manifest lists fragment %d twice", f.ID)
		}
		ids[f.ID] = true
	}
	m := &Manifest{
		Schema:        schema,
		Fragments:     frags,
		Version:       p.Version,
		Timestamp:     p.Timestamp.AsTime(),
		ReaderFlags:   p.ReaderFeatureFlags,
		WriterFlags:   p.WriterFeatureFlags,
		MaxFragmentID: p.MaxFragmentId,
		TxnFile:       p.TransactionFile,
		WriterLibrary: p.GetWriterVersion().GetLibrary(),
		WriterVersion: p.GetWriterVersion().GetVersion(),
		FileFormat:    p.GetDataFormat().GetFileFormat(),
		FormatVersion: p.GetDataFormat().GetVersion(),
		IndexSection:  p.IndexSection,
		TxnSection:    p.TransactionSection,
		pb:            p,
	}
	return m, nil
}

// hasConfig reports whether the manifest carries table config entries.
func (m *Manifest) hasConfig() bool { return len(m.pb.GetConfig()) > 0 }

// hasBasePaths reports whether the manifest lists base paths.
func (m *Manifest) hasBasePaths() bool { return len(m.pb.GetBasePaths()) > 0 }

// NumRows is the number of live rows of the version.
func (m *Manifest) NumRows() uint64 {
	var n uint64
	for i := range m.Fragments {
		n += m.Fragments[i].LiveRows()
	}
	return n
}

// nextFragmentID is the id the next new fragment gets: past
// max_fragment_id and past every fragment listed (a manifest another
// process wrote may state a max_fragment_id below them).
func (m *Manifest) nextFragmentID() uint64 {
	var next uint64
	if m.MaxFragmentID != nil {
		next = uint64(*m.MaxFragmentID) + 1
	}
	for _, f := range m.Fragments {
		next = max(next, f.ID+1)
	}
	return next
}

// Operation field numbers of lance.table.Transaction's oneof.
const (
	OpAppend          protowire.Number = 100
	OpDelete          protowire.Number = 101
	OpOverwrite       protowire.Number = 102
	OpCreateIndex     protowire.Number = 103
	OpRewrite         protowire.Number = 104
	OpMerge           protowire.Number = 105
	OpRestore         protowire.Number = 106
	OpReserveFrags    protowire.Number = 107
	OpUpdate          protowire.Number = 108
	OpProject         protowire.Number = 109
	OpUpdateConfig    protowire.Number = 110
	OpDataReplacement protowire.Number = 111
)

// Transaction is one lance.table.Transaction. Quiver builds Append,
// Overwrite (create), Update (merge-insert) and Rewrite (compaction)
// operations; for others it
// keeps the operation number (for the conflict rules) and its raw body.
type Transaction struct {
	ReadVersion uint64
	UUID        string
	Properties  map[string]string
	Op          protowire.Number
	// Fragments are the new fragments of an Append, Overwrite or Update
	// (ids 0: assigned when the manifest is built).
	Fragments []Fragment
	// Removed are the ids of the fragments an Update drops.
	Removed []uint64
	// Updated are the fragments an Update replaces (real ids, full
	// content, typically with a new deletion file).
	Updated []Fragment
	// Schema is an Overwrite's schema.
	Schema *lancefile.Schema
	// Groups are a Rewrite's groups of old and new fragments.
	Groups []RewriteGroup
	// Concurrent, when set, is asked about every version a commit of
	// this transaction rebases over (never encoded): an error, typically
	// writers.ErrConflict, ends the commit, and the caller plans again
	// against the new latest version. It carries the caller's rules on
	// what the transactions' properties record, which Lance's own
	// conflict rules ignore.
	Concurrent func(other *Transaction) error
	pb         *tablepb.Transaction // decoded from: re-encoded as it was
}

// Encode returns the protobuf bytes (a .txn file's content).
func (t *Transaction) Encode() ([]byte, error) {
	if t.pb != nil {
		return lancefile.Marshal(t.pb)
	}
	p := &tablepb.Transaction{ReadVersion: t.ReadVersion, Uuid: t.UUID, TransactionProperties: t.Properties}
	switch t.Op {
	case OpUpdate:
		// update_mode stays REWRITE_ROWS (0); fields_modified and
		// fields_for_preserving_frag_bitmap stay empty, which lance-format
		// §12 records as safe: no index is extended over new fragments.
		p.Operation = &tablepb.Transaction_Update_{Update: &tablepb.Transaction_Update{
			RemovedFragmentIds: t.Removed,
			UpdatedFragments:   fragmentsToPB(t.Updated),
			NewFragments:       fragmentsToPB(t.Fragments),
		}}
	case OpOverwrite:
		o := &tablepb.Transaction_Overwrite{Fragments: fragmentsToPB(t.Fragments)}
		if t.Schema != nil {
			o.Schema, o.SchemaMetadata = t.Schema.ToPB(), t.Schema.Metadata
		}
		p.Operation = &tablepb.Transaction_Overwrite_{Overwrite: o}
	case OpAppend:
		p.Operation = &tablepb.Transaction_Append_{Append: &tablepb.Transaction_Append{Fragments: fragmentsToPB(t.Fragments)}}
	case OpRewrite:
		// No rewritten_indices: the compaction leaves indexed fragments
		// alone, so every index stays as it is.
		r := &tablepb.Transaction_Rewrite{}
		for i := range t.Groups {
			r.Groups = append(r.Groups, t.Groups[i].toPB())
		}
		p.Operation = &tablepb.Transaction_Rewrite_{Rewrite: r}
	default:
		return nil, fmt.Errorf("lance: Quiver does not build %s transactions", opName(t.Op))
	}
	return lancefile.Marshal(p)
}

// DecodeTransaction parses a transaction (a .txn file or an inline
// section). Fragments are decoded for Append and Overwrite only.
func DecodeTransaction(msg []byte) (*Transaction, error) {
	p := &tablepb.Transaction{}
	if err := lancefile.Unmarshal(msg, p); err != nil {
		return nil, fmt.Errorf("lance: decode transaction: %w", err)
	}
	t := &Transaction{ReadVersion: p.ReadVersion, UUID: p.Uuid, Properties: p.TransactionProperties, pb: p}
	switch op := p.Operation.(type) {
	case *tablepb.Transaction_Append_:
		t.Fragments = fragmentsOf(op.Append.GetFragments())
	case *tablepb.Transaction_Overwrite_:
		t.Fragments = fragmentsOf(op.Overwrite.GetFragments())
	}
	t.Op = operation(p)
	return t, nil
}

// operation returns the field number of p's operation: the oneof member
// set, or for an operation newer than the pinned protos, the number of
// the unknown message field at or past OpAppend (0 when there is none).
func operation(p *tablepb.Transaction) protowire.Number {
	r := p.ProtoReflect()
	if fd := r.WhichOneof(r.Descriptor().Oneofs().ByName("operation")); fd != nil {
		return fd.Number()
	}
	for b := r.GetUnknown(); len(b) > 0; {
		num, typ, n := protowire.ConsumeField(b)
		if n < 0 {
			return 0
		}
		if num >= OpAppend && typ == protowire.BytesType {
			return num
		}
		b = b[n:]
	}
	return 0
}

package lanceformat

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// DataFile is one lance.table.DataFile: a data file of a fragment.
type DataFile struct {
	Path          string  // relative to data/
	Fields        []int32 // field ids stored in the file
	ColumnIndices []int32 // top-level column of each field (-1 none)
	Major, Minor  uint32  // 2/0 for format 2.0
	SizeBytes     uint64  // exact size, 0 = unknown
	extra         []byte
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
	extra          []byte
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
	extra        []byte // stable row id sequences etc., carried through
}

// LiveRows is the number of rows not deleted.
func (f *Fragment) LiveRows() uint64 {
	if f.Deletion == nil {
		return f.PhysicalRows
	}
	return f.PhysicalRows - min(f.PhysicalRows, f.Deletion.NumDeletedRows)
}

func int32s(vs []int32) []uint64 {
	out := make([]uint64, len(vs))
	for i, v := range vs {
		out[i] = uint64(uint32(v))
	}
	return out
}

func (d *DataFile) encode() pb {
	var b pb
	b.str(1, d.Path)
	b.packed(2, int32s(d.Fields))
	b.packed(3, int32s(d.ColumnIndices))
	b.uint(4, uint64(d.Major))
	b.uint(5, uint64(d.Minor))
	b.uint(6, d.SizeBytes)
	b.raw(d.extra)
	return b
}

func decodeDataFile(msg []byte) (DataFile, error) {
	var d DataFile
	err := eachField(msg, func(f field) error {
		var err error
		var vs []uint64
		switch f.num {
		case 1:
			d.Path = string(f.b)
		case 2, 3:
			if vs, err = f.uints(nil); err != nil {
				return err
			}
			for _, v := range vs {
				if f.num == 2 {
					d.Fields = append(d.Fields, int32(uint32(v)))
				} else {
					d.ColumnIndices = append(d.ColumnIndices, int32(uint32(v)))
				}
			}
		case 4:
			d.Major = uint32(f.u)
		case 5:
			d.Minor = uint32(f.u)
		case 6:
			d.SizeBytes = f.u
		default:
			d.extra = append(d.extra, f.raw...)
		}
		return nil
	})
	return d, err
}

func (d *DeletionFile) encode() pb {
	var b pb
	b.uint(1, d.FileType)
	b.uint(2, d.ReadVersion)
	b.uint(3, d.ID)
	b.uint(4, d.NumDeletedRows)
	b.raw(d.extra)
	return b
}

func decodeDeletionFile(msg []byte) (*DeletionFile, error) {
	d := &DeletionFile{}
	err := eachField(msg, func(f field) error {
		switch f.num {
		case 1:
			d.FileType = f.u
		case 2:
			d.ReadVersion = f.u
		case 3:
			d.ID = f.u
		case 4:
			d.NumDeletedRows = f.u
		default:
			d.extra = append(d.extra, f.raw...)
		}
		return nil
	})
	return d, err
}

func (fr *Fragment) encode() pb {
	var b pb
	b.uint(1, fr.ID)
	for i := range fr.Files {
		b.msg(2, fr.Files[i].encode())
	}
	if fr.Deletion != nil {
		b.msg(3, fr.Deletion.encode())
	}
	b.uint(4, fr.PhysicalRows)
	b.raw(fr.extra)
	return b
}

func decodeFragment(msg []byte) (Fragment, error) {
	var fr Fragment
	err := eachField(msg, func(f field) error {
		switch f.num {
		case 1:
			fr.ID = f.u
		case 2:
			d, err := decodeDataFile(f.b)
			if err != nil {
				return err
			}
			fr.Files = append(fr.Files, d)
		case 3:
			d, err := decodeDeletionFile(f.b)
			if err != nil {
				return err
			}
			fr.Deletion = d
		case 4:
			fr.PhysicalRows = f.u
		default:
			fr.extra = append(fr.extra, f.raw...)
		}
		return nil
	})
	return fr, err
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
	Schema        Schema
	Fragments     []Fragment
	Version       uint64
	Timestamp     time.Time
	ReaderFlags   uint64
	WriterFlags   uint64
	MaxFragmentID *uint64
	TxnFile       string // relative to _transactions/, or ""
	WriterLibrary string
	WriterVersion string
	FileFormat    string // data_format.file_format ("lance")
	FormatVersion string // data_format.version ("2.0")
	IndexSection  *uint64
	TxnSection    *uint64
	config        []byte // raw config entries (field 16), copied forward
	tableMetadata []byte // raw table_metadata entries (field 19)
	extra         []byte // other fields, carried through
	hasConfig     bool
	hasBasePaths  bool
}

// manifest field numbers Quiver must not copy into a new version.
const (
	mfVersionAuxData = 4
	mfTag            = 8
	mfNextRowID      = 14
	mfBasePaths      = 18
	mfBranch         = 20
)

func (m *Manifest) encode() pb {
	var b pb
	m.Schema.encodeFields(&b, 1)
	for i := range m.Fragments {
		b.msg(2, m.Fragments[i].encode())
	}
	b.uint(3, m.Version)
	encodeBytesMap(&b, 5, m.Schema.Metadata)
	if m.IndexSection != nil {
		b.uintAlways(6, *m.IndexSection)
	}
	var ts pb
	ts.uint(1, uint64(m.Timestamp.Unix()))
	ts.uint(2, uint64(m.Timestamp.Nanosecond()))
	b.msg(7, ts)
	b.uint(9, m.ReaderFlags)
	b.uint(10, m.WriterFlags)
	if m.MaxFragmentID != nil {
		b.uintAlways(11, *m.MaxFragmentID)
	}
	b.str(12, m.TxnFile)
	var wv pb
	wv.str(1, m.WriterLibrary)
	wv.str(2, m.WriterVersion)
	b.msg(13, wv)
	var df pb
	df.str(1, m.FileFormat)
	df.str(2, m.FormatVersion)
	b.msg(15, df)
	b.raw(m.config)
	b.raw(m.tableMetadata)
	b.raw(m.extra)
	if m.TxnSection != nil {
		b.uintAlways(21, *m.TxnSection)
	}
	return b
}

func decodeManifest(msg []byte) (*Manifest, error) {
	m := &Manifest{}
	err := eachField(msg, func(f field) error {
		switch f.num {
		case 1:
			fl, err := decodeField(f.b)
			if err != nil {
				return err
			}
			m.Schema.Fields = append(m.Schema.Fields, fl)
		case 2:
			fr, err := decodeFragment(f.b)
			if err != nil {
				return err
			}
			m.Fragments = append(m.Fragments, fr)
		case 3:
			m.Version = f.u
		case 5:
			k, v, err := mapEntry(f.b)
			if err != nil {
				return err
			}
			if m.Schema.Metadata == nil {
				m.Schema.Metadata = make(map[string][]byte)
			}
			m.Schema.Metadata[k] = slices.Clone(v)
		case 6:
			v := f.u
			m.IndexSection = &v
		case 7:
			var sec, nanos uint64
			if err := eachField(f.b, func(t field) error {
				switch t.num {
				case 1:
					sec = t.u
				case 2:
					nanos = t.u
				}
				return nil
			}); err != nil {
				return err
			}
			m.Timestamp = time.Unix(int64(sec), int64(nanos)).UTC()
		case 9:
			m.ReaderFlags = f.u
		case 10:
			m.WriterFlags = f.u
		case 11:
			v := f.u
			m.MaxFragmentID = &v
		case 12:
			m.TxnFile = string(f.b)
		case 13:
			return eachField(f.b, func(t field) error {
				switch t.num {
				case 1:
					m.WriterLibrary = string(t.b)
				case 2:
					m.WriterVersion = string(t.b)
				}
				return nil
			})
		case 15:
			return eachField(f.b, func(t field) error {
				switch t.num {
				case 1:
					m.FileFormat = string(t.b)
				case 2:
					m.FormatVersion = string(t.b)
				}
				return nil
			})
		case 16:
			m.config = append(m.config, f.raw...)
			m.hasConfig = true
		case 19:
			m.tableMetadata = append(m.tableMetadata, f.raw...)
		case 21:
			v := f.u
			m.TxnSection = &v
		case mfVersionAuxData, mfTag, mfBranch:
			// Per-version data: never copied into the next version.
		case mfNextRowID:
			// Only with stable row ids, which CheckWritable refuses.
		case mfBasePaths:
			m.hasBasePaths = true
			m.extra = append(m.extra, f.raw...)
		default:
			m.extra = append(m.extra, f.raw...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// NumRows is the number of live rows of the version.
func (m *Manifest) NumRows() uint64 {
	var n uint64
	for i := range m.Fragments {
		n += m.Fragments[i].LiveRows()
	}
	return n
}

// nextFragmentID is the id the next new fragment gets.
func (m *Manifest) nextFragmentID() uint64 {
	if m.MaxFragmentID != nil {
		return *m.MaxFragmentID + 1
	}
	var next uint64
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
// Overwrite (create) and Update (merge-insert) operations; for others it
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
	Schema *Schema
	opBody []byte // the operation of a decoded transaction
}

// Encode returns the protobuf bytes (a .txn file's content).
func (t *Transaction) Encode() []byte {
	var b pb
	b.uint(1, t.ReadVersion)
	b.str(2, t.UUID)
	b.stringMap(4, t.Properties)
	var op pb
	switch {
	case t.opBody != nil:
		op = t.opBody
	case t.Op == OpUpdate:
		// update_mode stays REWRITE_ROWS (0); fields_modified and
		// fields_for_preserving_frag_bitmap stay empty, which lance-format
		// §12 records as safe: no index is extended over new fragments.
		op.packed(1, t.Removed)
		for i := range t.Updated {
			op.msg(2, t.Updated[i].encode())
		}
		for i := range t.Fragments {
			op.msg(3, t.Fragments[i].encode())
		}
	default:
		for i := range t.Fragments {
			op.msg(1, t.Fragments[i].encode())
		}
		if t.Op == OpOverwrite && t.Schema != nil {
			t.Schema.encodeFields(&op, 2)
			encodeBytesMap(&op, 3, t.Schema.Metadata)
		}
	}
	b.msg(t.Op, op)
	return b
}

// DecodeTransaction parses a transaction (a .txn file or an inline
// section). Fragments are decoded for Append and Overwrite only.
func DecodeTransaction(msg []byte) (*Transaction, error) {
	t := &Transaction{}
	err := eachField(msg, func(f field) error {
		switch {
		case f.num == 1:
			t.ReadVersion = f.u
		case f.num == 2:
			t.UUID = string(f.b)
		case f.num == 4:
			k, v, err := mapEntry(f.b)
			if err != nil {
				return err
			}
			if t.Properties == nil {
				t.Properties = make(map[string]string)
			}
			t.Properties[k] = string(v)
		case f.num >= OpAppend && f.typ == protowire.BytesType:
			t.Op = f.num
			t.opBody = slices.Clone(f.b)
			if f.num == OpAppend || f.num == OpOverwrite {
				return eachField(f.b, func(x field) error {
					if x.num != 1 {
						return nil
					}
					fr, err := decodeFragment(x.b)
					if err != nil {
						return err
					}
					t.Fragments = append(t.Fragments, fr)
					return nil
				})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lance: decode transaction: %w", err)
	}
	return t, nil
}

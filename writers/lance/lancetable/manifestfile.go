package lancetable

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
)

// Naming is a dataset's manifest naming scheme. One dataset never mixes
// schemes: Quiver follows the existing files and creates V2 datasets.
type Naming int

const (
	// NamingV2 names version v "_versions/{2^64-1-v, 20 digits}.manifest"
	// (LanceDB's default: the newest sorts first).
	NamingV2 Naming = iota
	// NamingV1 names version v "_versions/{v}.manifest".
	NamingV1
)

const (
	versionsDir  = "_versions/"
	manifestExt  = ".manifest"
	manifestTail = 16 // [u64 pos][u16 0][u16 2]["LANC"]
)

// ManifestKey returns the storage key of version v.
func ManifestKey(v uint64, n Naming) string {
	if n == NamingV1 {
		return versionsDir + strconv.FormatUint(v, 10) + manifestExt
	}
	return fmt.Sprintf("%s%020d%s", versionsDir, uint64(math.MaxUint64)-v, manifestExt)
}

// parseManifestName parses a file name inside _versions/. Detached
// versions ("d...") and temporary files are not manifests.
func parseManifestName(name string) (uint64, Naming, bool) {
	stem, ok := strings.CutSuffix(name, manifestExt)
	if !ok || stem == "" || stem[0] < '0' || stem[0] > '9' {
		return 0, 0, false
	}
	n, err := strconv.ParseUint(stem, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if len(stem) == 20 {
		return math.MaxUint64 - n, NamingV2, true
	}
	return n, NamingV1, true
}

// encodeManifestFile lays out one manifest file: the index section copied
// from the previous version (raw IndexSection protobuf, may be nil), the
// inline transaction, the manifest and the footer. It sets m's
// TxnSection and IndexSection offsets.
func encodeManifestFile(m *Manifest, txn, index []byte) ([]byte, error) {
	var out []byte
	section := func(b []byte) *uint64 {
		off := uint64(len(out))
		out = binary.LittleEndian.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
		return &off
	}
	m.TxnSection, m.IndexSection = nil, nil
	// The index section comes first, where Lance writes it: pylance 14
	// misreads an index section that does not start the file.
	if index != nil {
		m.IndexSection = section(index)
	}
	if txn != nil {
		m.TxnSection = section(txn)
	}
	pos := uint64(len(out))
	mb, err := m.encode()
	if err != nil {
		return nil, err
	}
	section(mb)
	out = binary.LittleEndian.AppendUint64(out, pos)
	out = binary.LittleEndian.AppendUint16(out, 0)
	out = binary.LittleEndian.AppendUint16(out, 2)
	return append(out, lancefile.Magic...), nil
}

// manifestFile is a decoded manifest file.
type manifestFile struct {
	m     *Manifest
	txn   []byte // inline transaction, or nil
	index []byte // IndexSection protobuf, or nil
}

// decodeManifestFile parses one manifest file, checking every length
// against the file size before using it.
func decodeManifestFile(b []byte) (*manifestFile, error) {
	if len(b) < manifestTail+4 || string(b[len(b)-4:]) != lancefile.Magic {
		return nil, fmt.Errorf("not a Lance manifest (no LANC footer)")
	}
	pos := binary.LittleEndian.Uint64(b[len(b)-manifestTail:])
	end := uint64(len(b) - manifestTail)
	if !lancefile.Within(pos, 4, end) {
		return nil, fmt.Errorf("manifest offset %d is outside the file (%d bytes)", pos, len(b))
	}
	n := uint64(binary.LittleEndian.Uint32(b[pos:]))
	if n != end-pos-4 {
		return nil, fmt.Errorf("manifest length %d does not reach the footer", n)
	}
	m, err := decodeManifest(b[pos+4 : end])
	if err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	f := &manifestFile{m: m}
	if m.TxnSection != nil {
		if f.txn, err = sectionAt(b[:pos], *m.TxnSection); err != nil {
			return nil, fmt.Errorf("transaction section: %w", err)
		}
	}
	if m.IndexSection != nil {
		if f.index, err = sectionAt(b[:pos], *m.IndexSection); err != nil {
			return nil, fmt.Errorf("index section: %w", err)
		}
	}
	return f, nil
}

// sectionAt reads a [u32 len][bytes] section at off.
func sectionAt(b []byte, off uint64) ([]byte, error) {
	if !lancefile.Within(off, 4, uint64(len(b))) {
		return nil, fmt.Errorf("offset %d is outside the file", off)
	}
	n := uint64(binary.LittleEndian.Uint32(b[off:]))
	if !lancefile.Within(off+4, n, uint64(len(b))) {
		return nil, fmt.Errorf("length %d at offset %d runs past the manifest", n, off)
	}
	return b[off+4 : off+4+n], nil
}

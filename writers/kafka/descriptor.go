package kafka

import (
	"encoding/json"
	"path/filepath"

	"github.com/quiver-ingest/quiver/writers"
)

// stageSuffix ends the name of a precommitted staging file.
const stageSuffix = ".stage"

// descriptor is the Precommit result: which durable staging file holds the
// key's records and what it must hold. Produced counts the records an
// auto-commit stream sent in its transaction (they are not in the file,
// which holds only its dead-letter records).
//
// A descriptor is client input (the commit action hands them over), so it
// names its staging file, never paths it: File is a name in the
// endpoint's staging folder, and Commit accepts only the name the key
// itself stages under (stageName), so a forged descriptor can neither
// reach another file nor publish another key's records.
type descriptor struct {
	Endpoint string `json:"endpoint"`
	File     string `json:"file,omitempty"` // "" when nothing was staged
	// LegacyPath is the absolute staging path earlier builds wrote, still
	// in journals after an upgrade: accepted only when it is exactly the
	// file File would name (see resolveStage).
	LegacyPath string `json:"path,omitempty"`
	Size       int64  `json:"size"`
	CRC        uint32 `json:"crc"`
	Records    int64  `json:"records"`
	Produced   int64  `json:"produced,omitempty"`

	path string // the staging file on this server: set by Precommit and resolveStage
}

func (d descriptor) encode() writers.Descriptor {
	b, _ := json.Marshal(d) // cannot fail: plain fields
	return b
}

// decodeDescriptor parses descriptor i of a Commit of key and resolves its
// staging file (resolveStage). Anything else is ErrInvalid, before any
// file is touched.
func (w *Writer) decodeDescriptor(key writers.TxnKey, i int, b writers.Descriptor) (descriptor, error) {
	var d descriptor
	if err := json.Unmarshal(b, &d); err != nil {
		return d, writers.Errorf(writers.ErrInvalid, "kafka: endpoint %q: descriptor %d is not a Kafka descriptor (%w): hand over only descriptors precommitted by a Kafka endpoint", w.env.Endpoint, i, err)
	}
	if d.Endpoint != w.env.Endpoint {
		return d, writers.Errorf(writers.ErrInvalid, "kafka: endpoint %q: descriptor %d was precommitted by endpoint %q: Kafka endpoints commit only their own descriptors", w.env.Endpoint, i, d.Endpoint)
	}
	return d, w.resolveStage(key, i, &d)
}

// resolveStage sets d.path from the staging file d names: only
// stageName(key)+stageSuffix in the staging folder, and only when d has
// records (a file with none is never staged). An earlier build's
// LegacyPath must be that very file.
func (w *Writer) resolveStage(key writers.TxnKey, i int, d *descriptor) error {
	name := d.File
	if d.LegacyPath != "" {
		if name != "" {
			return writers.Errorf(writers.ErrInvalid, "kafka: endpoint %q: descriptor %d names both a staging file and a path", w.env.Endpoint, i)
		}
		if filepath.Dir(d.LegacyPath) != w.dir {
			return writers.Errorf(writers.ErrInvalid, "kafka: endpoint %q: descriptor %d: staging path %q is not in the endpoint's staging folder %s", w.env.Endpoint, i, d.LegacyPath, w.dir)
		}
		name = filepath.Base(d.LegacyPath)
	}
	switch want := stageName(key) + stageSuffix; {
	case name == "" && d.Records > 0:
		return writers.Errorf(writers.ErrInvalid, "kafka: endpoint %q: descriptor %d has %d records but no staging file", w.env.Endpoint, i, d.Records)
	case name == "":
		return nil
	case name != want:
		return writers.Errorf(writers.ErrInvalid, "kafka: endpoint %q: descriptor %d names staging file %q, but %s stages only in %q: hand over only the descriptor its own precommit returned", w.env.Endpoint, i, name, key, want)
	case d.Records <= 0:
		return writers.Errorf(writers.ErrInvalid, "kafka: endpoint %q: descriptor %d names staging file %q but no records", w.env.Endpoint, i, name)
	}
	d.path = filepath.Join(w.dir, name)
	return nil
}

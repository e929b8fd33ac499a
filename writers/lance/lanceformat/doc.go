// Package lanceformat reads and writes Lance datasets (LanceDB npm 0.31 /
// lance 8 and pylance 14 compatible) without any Lance code: data files in
// Lance file formats 2.0, 2.1 and 2.2 (v21*.go: structural layouts
// mini-block and full-zip, FastLanes bit-packing, FSST, dictionaries, run
// lengths, byte-stream split, LZ4/zstd, maps), manifests in both
// naming schemes, deletion files (.arrow and roaring .bin), transactions,
// and the put-if-absent commit protocol with rebasing over concurrent
// appends.
//
// The byte layouts follow the Lance format specification (the file format
// and table format pages of the Lance documentation, and the .proto files
// of the lance repository), checked against LanceDB 0.31.0 by the tests
// (docs/lance.md, "What Quiver writes"); the protobuf messages are encoded and
// decoded by hand with protowire, keeping only the fields Quiver needs and
// carrying every other field of a message through unchanged.
//
// What is refused, with an error wrapping writers.ErrInvalid that says what
// to do: data files of format 2.3 or newer (Lance's unstable "next"
// formats) or legacy 0.1, datasets with feature flags Quiver does not
// implement (stable row ids, multiple base paths, ...), encodings the
// reference writers do not emit for Quiver's tested data (2.0 compressed
// buffers; 2.2 variable-width packed structs, blobs), and Arrow types
// Quiver does not write in the dataset's format (CheckFormatTypes).
//
// Concurrency: values of this package are not safe for concurrent mutation;
// a Dataset is an immutable snapshot of one version and may be shared.
package lanceformat

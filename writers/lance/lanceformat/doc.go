// Package lanceformat reads and writes Lance datasets (lance 8 / LanceDB
// 0.31 compatible) without any Lance code: data files in Lance file format
// 2.0, manifests in both naming schemes, deletion files (.arrow and roaring
// .bin), transactions, and the put-if-absent commit protocol with rebasing
// over concurrent appends.
//
// The byte layouts follow the Lance format specification (the file format
// and table format pages of the Lance documentation, and the .proto files
// of the lance repository), checked against LanceDB 0.31.0 by the tests
// (docs/lance.md, "What Quiver writes"); the protobuf messages are encoded and
// decoded by hand with protowire, keeping only the fields Quiver needs and
// carrying every other field of a message through unchanged.
//
// What is refused, with an error wrapping writers.ErrInvalid that says what
// to do: data files of format 2.1 or newer, datasets with feature flags
// Quiver does not implement (stable row ids, multiple base paths, ...),
// encodings LanceDB's 2.0 writer does not emit (compressed or bit-packed
// buffers), null structs, and Arrow types without a Lance 2.0 mapping.
//
// Concurrency: values of this package are not safe for concurrent mutation;
// a Dataset is an immutable snapshot of one version and may be shared.
package lanceformat

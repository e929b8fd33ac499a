// Package lancetable reads and writes the table side of Lance datasets
// (LanceDB npm 0.31 / lance 8 and pylance 14 compatible) without any Lance
// code: manifests in both naming schemes, dataset versions, deletion files
// (.arrow and roaring .bin), transactions, compaction rewrites, reading a
// fragment's live rows, and the put-if-absent commit protocol with
// rebasing over concurrent appends. The data files themselves are
// lancefile's.
//
// The byte layouts follow the Lance table format specification (the table
// format page of the Lance documentation and the .proto files of the lance
// repository), checked against LanceDB 0.31.0 by the tests (docs/lance.md,
// "What Quiver writes"); the protobuf messages keep only the fields Quiver
// needs and carry every other field of a message through unchanged.
//
// What is refused, with an error wrapping writers.ErrInvalid that says what
// to do: datasets with feature flags Quiver does not implement (stable row
// ids, multiple base paths, ...) and datasets whose data storage version
// lancefile does not write (legacy 0.1, 2.3 and newer).
//
// Imports: lancefile and the generated lancepb messages; never
// writers/lance, flightsvc or server.
//
// Concurrency: values of this package are not safe for concurrent mutation;
// a Dataset is an immutable snapshot of one version and may be shared.
package lancetable

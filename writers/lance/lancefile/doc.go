// Package lancefile reads and writes Lance data files (.lance) in file
// formats 2.0, 2.1 and 2.2 (LanceDB npm 0.31 / lance 8 and pylance 14
// compatible) without any Lance code, and maps Arrow schemas to Lance
// schemas: the file layout (pages, column metadata, footer), 2.0 array
// encodings, and for 2.1 and 2.2 the mapping of fields to leaf columns,
// blob pages and packed structs (v21*.go). The pages of 2.1 and 2.2
// (mini-block and full-zip, FastLanes bit-packing, FSST, dictionaries,
// run lengths, byte-stream split, LZ4/zstd, maps) are encoded and decoded
// by lanceenc.
//
// The byte layouts follow the Lance file format specification (the file
// format page of the Lance documentation and the .proto files of the lance
// repository), checked against LanceDB 0.31.0 and pylance's files by the
// tests (docs/lance.md, "What Quiver writes").
//
// What is refused, with an error wrapping writers.ErrInvalid that says what
// to do: data files of format 2.3 or newer (Lance's unstable "next"
// formats) or legacy 0.1, encodings the reference writers do not emit for
// Quiver's tested data (2.0 compressed buffers; 2.2 variable-width packed
// structs, blobs), and Arrow types Quiver does not write in a format
// (CheckFormatTypes).
//
// Imports: lanceenc and the generated lancepb messages; never the table side
// (lancetable: manifests, fragments, deletion files), writers/lance,
// flightsvc or server.
//
// Concurrency: values of this package are not safe for concurrent
// mutation.
package lancefile

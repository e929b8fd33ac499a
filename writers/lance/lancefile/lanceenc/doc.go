// Package lanceenc encodes and decodes the pages of Lance file formats 2.1
// and 2.2, one leaf column at a time, without any Lance code (structural
// layouts mini-block and full-zip, repetition and definition levels,
// FastLanes bit-packing, FSST, dictionaries, run lengths, byte-stream
// split, LZ4/zstd): EncodeField turns Arrow chunks of a top-level field
// into pages, and DecodePage with Assemble turns a page back into an
// Arrow array, charging what it allocates to a Budget so that hostile
// input cannot make it allocate without limit. It also holds the buffer
// primitives (validity bits, fixed-width values, binary offsets) that
// lancefile's 2.0 encodings share.
//
// Where pages live in a file (offsets, column metadata, footer), schemas
// and the 2.0 encodings are lancefile's. This package must not import
// lancefile, lancetable, writers/lance, flightsvc or server.
//
// Concurrency: values of this package are not safe for concurrent
// mutation.
package lanceenc

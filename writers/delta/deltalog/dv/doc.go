// Package dv is Delta deletion vectors as files: where a descriptor's
// vector lives (DeletionVectorKey), reading every stored form
// (ReadDeletionVector: relative "u" files, inline "i" descriptors; absolute
// "p" paths are refused), writing the deletion-vector file of a commit
// (DeletionVectorFile), and the bitmap and Z85 codecs underneath
// (portable roaring64 with Delta's magic and CRC, byte-compatible with
// Spark's). The descriptor itself (deltalog.DeletionVector) is an action
// field, which package deltalog owns.
//
// It imports deltalog for the action types, Store and error classes;
// deltalog must not import it back. It must not import writers/delta,
// flightsvc, server or txn.
package dv

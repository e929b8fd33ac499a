// Package deltaupsert is the matching engine of Delta upserts: which rows
// of a table's data files a changelog's merge keys hit, and what the rows
// that replace them keep. It splits merge keys into partition and data
// columns (KeyColumns), groups the changelog's keys by partition with
// their bounds for pruning by file statistics (KeyGroups), finds the
// matched rows of one data file (FileMatcher, FileMatches), from the file
// or from a cache of files' key indexes (KeyCache), gathers the values of
// columns a partial update keeps from the rows it replaces (KeptColumns),
// and stores keys in the form files hold them (StoredKeys).
//
// It never reaches into the Writer: what it reads comes in as readers of
// data files, a column map and row tracking (deltalayout), and the memory
// allocator and key cache to use. The Writer (writers/delta) plans,
// writes and commits the upsert (its upsert.go, upsertmerge.go) and
// warms the key cache (its keywarm.go). It imports deltalog and
// deltalayout; it must not import writers/delta, flightsvc, server or
// txn.
package deltaupsert

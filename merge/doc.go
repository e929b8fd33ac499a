// Package merge holds the pure, sink-independent functions over Arrow that
// upserts need: the changelog convention, changelog collapse to one row per
// key, and key encoding and key indexes used to match source keys against
// target rows. It is shared by the Kafka upsert envelope, the Delta upsert
// and the Lance merge-insert.
//
// merge imports only arrow-go, the standard library and the error classes of
// writers (writers.ErrInvalid, writers.ErrExhausted); it must never import a
// sink, a format or storage package.
//
// # Changelog convention
//
// A changelog is a stream of record batches with the target's columns plus
// optional metadata columns, which never reach the target (see
// [StripMetadata]):
//
//   - _op (utf8, large_utf8 or dictionary of utf8): "I" (insert), "U"
//     (update), "r" (snapshot read) and null mean upsert; "D" means delete;
//     a missing _op column means every row is an upsert. Any other value is
//     an error naming the row.
//   - _ts_ms (int64): the source's event time; informational, stripped.
//   - __weight (int64): a Z-set weight, +1 insert, -1 retract. When present
//     it alone decides: the weights of a key are summed, net > 0 means the
//     key is live with the values of its latest positive-weight row, net <= 0
//     means the key is deleted. _op is still validated but does not change
//     the outcome. A null weight is an error naming the row.
//
// Without __weight the last occurrence of a key in stream order wins.
//
// # Keys
//
// A key is one or several columns (signed and unsigned integers, utf8,
// large_utf8, string_view, binary, large_binary, binary_view,
// fixed_size_binary, date32, date64, time32, time64, timestamp, duration,
// decimal128, bool). [KeyEncoder] turns the key of each row into a compact
// byte string; the format is given on [KeyEncoder]. A null key value is an
// error naming the row and the column.
//
// # Errors
//
// Every input error wraps writers.ErrInvalid; row errors are [*RowError].
//
// # Concurrency
//
// No type in this package is safe for concurrent use unless its doc says so;
// each belongs to one goroutine (one stream or transaction).
package merge

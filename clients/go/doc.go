// Package quiver is the Go client of the Quiver Arrow Flight ingestion
// server.
//
// A [Client] holds one gRPC connection; it is safe for concurrent use, and
// several Puts may stream over it at once (more connections do not make
// loopback ingestion faster). Three ways to write:
//
//   - [Client.Put] is an auto-commit stream: every batch of the reader lands
//     in one sink commit when the stream ends, or nothing does. Retrying a
//     Put whose outcome is unknown may land the rows twice.
//   - [Client.Begin] (or a [Client.Txn] handle's first Put) begins a new
//     attempt of transaction (writer, epoch), fencing whatever an earlier
//     attempt of the epoch staged or precommitted, and the [Txn] names that
//     attempt in every call. [Txn.Put] stages rows invisibly, [Txn.Precommit]
//     makes them durable, [Txn.Commit] publishes them; [Client.Resume] keeps
//     a precommitted attempt to commit it after a restart. Replaying an epoch
//     that already committed succeeds and changes nothing
//     ([TxnStatus.Replayed]), so a pipeline that replays after a crash gets
//     exactly-once delivery without special cases.
//   - [Client.Stream] is a continuous stream for a producer that never
//     ends (a collector, a log shipper): [Stream.Write] batches one at a
//     time, the server commits them every commit interval, together with
//     the endpoint's other streams, and the Stream retains each batch until
//     it is durable. It reconnects by itself when the server or the network
//     fails and resends only what is not durable, so each batch lands
//     exactly once; [Stream.Durable] tells where the writer stands.
//
// The wire protocol is plain Arrow Flight (docs/flight.md and
// docs/transactions.md): DoPut with a PATH descriptor
// ["<endpoint>"] or a CMD descriptor {"endpoint","writer","epoch","attempt"}, one
// PutResult per batch plus a final one, a CMD descriptor
// {"endpoint","writer","stream":true} for continuous streams (batches carry
// {"seq":N}, answers say which seq is durable), and JSON DoActions. Any Flight
// client (pyarrow.flight, Java, Rust) can do the same; this package only
// spares Go callers the JSON.
//
// Errors returned by calls that reached the server keep their gRPC status:
// status.Code(err) gives the class (InvalidArgument for bad input,
// FailedPrecondition for a wrong transaction state, Unknown when a commit's
// outcome is unknown and must be reconciled with [Client.CommittedEpoch]).
//
// This package imports nothing of the server; it depends only on arrow-go
// and gRPC.
package quiver

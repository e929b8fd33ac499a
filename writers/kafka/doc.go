// Package kafka is the Kafka sink (`sink: kafka`): it lands each row of an
// endpoint's streams as one record of a Kafka topic, produced with
// github.com/IBM/sarama (idempotent, acks=all, one request in flight per
// broker), with JSON or Avro values and keys from a key column
// (writers/kafka/kafkaenc), a choice of partitioners, an append or upsert
// envelope and a dead-letter topic.
//
// # Auto-commit streams and transactions
//
// Write serializes rows at once into the final record bytes.
//
//   - An auto-commit stream runs inside a Kafka transaction of its own, on
//     a transactional producer leased from the endpoint's pool (ids
//     quiver/<endpoint>/auto/<instance>/<n>, reused across streams, so
//     InitProducerId is paid once per pooled producer): Write sends each
//     batch as it arrives, blocking while 16 MiB of the stream's records
//     are unacknowledged; Precommit waits for every delivery report;
//     Commit commits the transaction; Rollback or any failure aborts it.
//     Encoding and producing overlap, and read_committed consumers see a
//     stream whole or not at all. Across a server crash it is
//     at-least-once: the open transaction is aborted (by the restarted
//     server's producer of the same id, or at the transaction timeout)
//     and the client sends the stream again (autotxn.go, autopool.go).
//   - Transactions are exactly-once across restarts: Write appends the
//     records to a staging file of the key under
//     <data_dir>/kafka/<endpoint>/ (format in docs/kafka.md: length- and
//     CRC-32C-framed key, value and headers); Precommit fsyncs it and
//     returns its descriptor (path, size, CRC, record count); Commit uses
//     the writer's sarama transactional producer (id derived from the
//     endpoint and the writer, kept between commits), produces the staged
//     records plus one marker record {endpoint, writer, epoch} to the
//     compacted marker topic, and commits the Kafka transaction. A failed
//     commit aborts and can be retried from the file, also after a
//     restart; a commit at or below the writer's committed epoch is a
//     replay that changes nothing. That epoch is read from the marker
//     topic (read_committed) once per producer and then cached; a fenced
//     or failed producer drops both (txn.go says why this is sound).
//
// Records the broker would refuse for their own sake, as predicted from
// the topic's configs read at Open (larger than max.message.bytes, or
// keyless for a compacted topic), are diverted to the dead-letter topic
// (dlq_topic) when encoded, so they never abort their neighbours'
// transaction: they are staged in the key's file and produced at commit,
// outside the Kafka transaction (at least once). Any other record the
// broker refuses fails the transaction it is in.
//
// Every connection to the brokers (producers, admin, the read_committed
// marker reads) is a sarama client built from one configuration with the
// endpoint's TLS and SASL settings (security.go, producer_config.go); the
// Schema Registry client has its own TLS and basic authentication.
//
// The package imports the writers contract, merge (upsert collapse),
// kafkaenc, sarama (the only Kafka client) and franz-go's sr (the Schema
// Registry's REST client); never the server.
package kafka

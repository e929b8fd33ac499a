// Package kafka is the Kafka sink (`sink: kafka`): it lands each row of an
// endpoint's streams as one record of a Kafka topic, produced with
// github.com/IBM/sarama (idempotent, acks=all, one request in flight per
// broker), with JSON or Avro values and keys from a key column
// (writers/kafka/kafkaenc), a choice of partitioners, an append or upsert
// envelope and a dead-letter topic.
//
// # Staging
//
// Write serializes rows at once into the final record bytes and appends
// them to a staging file of the key under <data_dir>/kafka/<endpoint>/
// (format in docs/kafka.md: length- and CRC-32C-framed key, value and
// headers). Nothing reaches Kafka before Commit, so a stream that fails,
// and a transaction that rolls back, publish nothing.
//
//   - Auto-commit streams are at-least-once: Commit produces the staged
//     records with the shared idempotent producer and returns after every
//     delivery report; a partial failure reports how many records were
//     acknowledged.
//   - Transactions are exactly-once across restarts: Precommit fsyncs the
//     file and returns its descriptor (path, size, CRC, record count);
//     Commit uses the writer's sarama transactional producer (id derived
//     from the endpoint and the writer, kept between commits), produces
//     the staged records plus one marker record {endpoint, writer, epoch}
//     to the compacted marker topic, and commits the Kafka transaction. A
//     failed commit aborts and can be retried from the file, also after a
//     restart; a commit at or below the writer's committed epoch is a
//     replay that changes nothing. That epoch is read from the marker
//     topic (read_committed) once per producer and then cached; a fenced
//     or failed producer drops both (txn.go says why this is sound).
//
// Records the broker refuses for their own sake go to the dead-letter
// topic (dlq_topic); records larger than the topic's max.message.bytes are
// routed there when staged, so they never fail their neighbours' batches.
//
// The package imports the writers contract, merge (upsert collapse),
// kafkaenc, sarama and franz-go (admin and read_committed reads); never
// the server.
package kafka

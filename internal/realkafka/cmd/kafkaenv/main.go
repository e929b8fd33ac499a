// Command kafkaenv gives the Python interop suite a Kafka to test against:
// the run's real Apache Kafka broker (the one $QUIVER_KAFKA_BROKER
// describes, or one it starts) and a Schema Registry (srfake, which speaks
// the REST API of Confluent's registry that the sink and confluent-kafka's
// SchemaRegistryClient call). It prints one JSON line describing both
// and keeps them up until its standard input closes, so they never
// outlive the test session that started it.
//
//	{"broker": {"plain": "127.0.0.1:…", …}, "registry": "http://127.0.0.1:…"}
//
// Without Java it prints {"error": "…", "no_java": true} and exits 0.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/quiver-ingest/quiver/internal/realkafka"
	"github.com/quiver-ingest/quiver/writers/kafka/kafkaenc/srfake"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kafkaenv:", err)
		os.Exit(1)
	}
}

func run() error {
	b, err := realkafka.Shared()
	if errors.Is(err, realkafka.ErrNoJava) {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{"error": err.Error(), "no_java": true})
	}
	if err != nil {
		return err
	}
	defer realkafka.StopShared()
	reg := srfake.New()
	defer reg.Close()
	if err := json.NewEncoder(os.Stdout).Encode(map[string]any{"broker": b, "registry": reg.URL}); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

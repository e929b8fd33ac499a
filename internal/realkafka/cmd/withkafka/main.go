// Command withkafka runs a command with a real Apache Kafka broker
// (package realkafka) started for it and described in
// $QUIVER_KAFKA_BROKER, so that every test binary of `go test ./...` shares
// one broker start:
//
//	go run ./internal/realkafka/cmd/withkafka go test ./...
//
// Without Java it runs the command alone (the tests needing the broker
// then skip, or fail under CI=true). It exits with the command's status.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/quiver-ingest/quiver/internal/realkafka"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: withkafka command [args...]")
		os.Exit(2)
	}
	os.Exit(run(os.Args[1], os.Args[2:]))
}

func run(name string, args []string) int {
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	b, err := realkafka.Start()
	switch {
	case errors.Is(err, realkafka.ErrNoJava):
		fmt.Fprintln(os.Stderr, "withkafka: no broker:", err)
	case err != nil:
		fmt.Fprintln(os.Stderr, "withkafka:", err)
		return 1
	default:
		defer b.Stop()
		state := filepath.Join(b.Dir, "broker.json")
		if err := b.WriteState(state); err != nil {
			fmt.Fprintln(os.Stderr, "withkafka:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "withkafka: Apache Kafka %s on %s (PLAINTEXT) and %s (SASL_SSL)\n", realkafka.Version, b.Plain, b.SASLSSL)
		cmd.Env = append(os.Environ(), realkafka.Env+"="+state)
	}
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "withkafka:", err)
		return 1
	}
	return 0
}

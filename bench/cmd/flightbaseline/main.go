// Command flightbaseline serves the benchmarks' bare arrow-go Flight server
// (package bench: it decodes and drops every batch and answers Quiver's
// acks) on 127.0.0.1, until it is interrupted, so that clients in other
// languages are measured against it (bench/python_clients.py). It prints
// one line, "listening ADDR", once it serves.
//
//	go run ./bench/cmd/flightbaseline
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/bench"
	quiver "github.com/quiver-ingest/quiver/clients/go"
)

func main() {
	addr, stop, err := bench.StartBaseline(memory.DefaultAllocator, quiver.DefaultMaxMessageBytes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flightbaseline:", err)
		os.Exit(1)
	}
	fmt.Println("listening", addr)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "flightbaseline:", err)
		os.Exit(1)
	}
}

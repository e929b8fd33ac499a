// Command quiverbench runs Quiver's benchmarks, one scenario per run, each
// through the server assembly the quiver binary serves (interceptors
// included), started in process (memory: a quiver serve process of its
// own):
//
//	go run ./bench/cmd/quiverbench --baseline --streams 1,4               # ingest (the default)
//	go run ./bench/cmd/quiverbench --scenario delta-append --streams 1,4
//	go run ./bench/cmd/quiverbench --scenario upsert --table-rows 2000000 --change-rows 200000 --lancedb
//	go run ./bench/cmd/quiverbench --scenario merge-insert --base-rows 2000000 --merge-rows 200000
//	go run ./bench/cmd/quiverbench --scenario kafka --streams 1,4 --rows 200000
//	go run ./bench/cmd/quiverbench --scenario lance-append --streams 1,4 --rows 1000000
//	go run ./bench/cmd/quiverbench --scenario scale-out --servers 1,2,3 --commits 60
//	go run ./bench/cmd/quiverbench --scenario memory --quiver bin/quiver --streams 1,4,16,64
//	go run ./bench/cmd/quiverbench --scenario optimize --quiver bin/quiver --no-spark
//
// Each scenario is a package of bench/scenario; `--scenario NAME -h` lists
// its flags. The LanceDB references (merge-insert, lance-append, upsert
// --lancedb) need node and the LanceDB probe installed (make lance-probe);
// scale-out needs moto in the project's .venv (make venv), optimize the
// .venv's delta-rs, pylance and (unless --no-spark) Spark.
// QUIVERBENCH_CPUPROFILE=FILE writes a CPU profile of the whole run
// (server, clients and references in process) to FILE, for go tool pprof.
// `quiver bench` runs the ingest scenario alone (the quiver binary links
// no test support). docs/benchmarks.md says what the numbers mean.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/quiver-ingest/quiver/bench"
	"github.com/quiver-ingest/quiver/bench/scenario/collector"
	"github.com/quiver-ingest/quiver/bench/scenario/deltaappend"
	"github.com/quiver-ingest/quiver/bench/scenario/ingest"
	"github.com/quiver-ingest/quiver/bench/scenario/kafka"
	"github.com/quiver-ingest/quiver/bench/scenario/lanceappend"
	"github.com/quiver-ingest/quiver/bench/scenario/memory"
	"github.com/quiver-ingest/quiver/bench/scenario/mergeinsert"
	"github.com/quiver-ingest/quiver/bench/scenario/optimize"
	"github.com/quiver-ingest/quiver/bench/scenario/scaleout"
	"github.com/quiver-ingest/quiver/bench/scenario/upsert"
)

func main() {
	// Cancelled on SIGINT or SIGTERM, so an interrupted benchmark still
	// stops its server and removes its files.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := profiled(os.Getenv("QUIVERBENCH_CPUPROFILE"), func() error {
		return bench.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, scenarios()...)
	})
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "quiverbench:", err)
		os.Exit(1)
	}
}

// scenarios are quiverbench's scenarios, the default first.
func scenarios() []bench.Scenario {
	return []bench.Scenario{ingest.Scenario(), deltaappend.Scenario(), upsert.Scenario(),
		mergeinsert.Scenario(), kafka.Scenario(), lanceappend.Scenario(), scaleout.Scenario(), memory.Scenario(), optimize.Scenario(), collector.Scenario()}
}

// profiled runs run, writing a CPU profile to path unless it is empty.
func profiled(path string, run func() error) error {
	if path == "" {
		return run()
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("QUIVERBENCH_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("QUIVERBENCH_CPUPROFILE: %w", err)
	}
	err = run()
	pprof.StopCPUProfile()
	return errors.Join(err, f.Close())
}

// Command parquetencode encodes the record batches of an Arrow IPC stream
// file with writers/parquetio alone — the raw Parquet encoder Quiver's
// Delta sink is built on, with the sink's default row groups — to a
// discarded output, and prints the CPU seconds and wall seconds the
// encoding took (the file is read before timing) as JSON. make bench-delta
// (bench/delta_vs_reference.py) puts the server's CPU per million rows
// next to it.
//
//	go run ./bench/cmd/parquetencode --codec zstd --streams 1 [--cpuprofile cpu.out] data.arrows
//
// With --streams N the batches are dealt round-robin to N files encoded
// concurrently, as N Flight streams would write them.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/parquetio"
)

// rowGroupRows is the Delta sink's default parquet.row_group_rows.
const rowGroupRows = 128 << 10

func main() {
	codec := flag.String("codec", parquetio.CompressionZstd, "zstd, snappy or none")
	streams := flag.Int("streams", 1, "files encoded concurrently")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the encoding to this file (go tool pprof)")
	flag.Parse()
	if flag.NArg() != 1 || *streams < 1 {
		fmt.Fprintln(os.Stderr, "usage: parquetencode [--codec zstd] [--streams N] FILE.arrows")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *codec, *streams, *profile); err != nil {
		fmt.Fprintln(os.Stderr, "parquetencode:", err)
		os.Exit(1)
	}
}

func run(path, codec string, streams int, profile string) error {
	batches, err := readStream(path)
	if err != nil {
		return err
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var rows int64
	for _, b := range batches {
		rows += b.NumRows()
	}
	cpu0, start := cpuSeconds(), time.Now()
	errs := make([]error, streams)
	var wg sync.WaitGroup
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[s] = encode(batches, s, streams, codec)
		}()
	}
	wg.Wait()
	wall, cpu := time.Since(start).Seconds(), cpuSeconds()-cpu0
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"rows": rows, "streams": streams, "codec": codec, "cpu_seconds": cpu, "wall_seconds": wall,
	})
}

// encode writes batches s, s+streams, ... to one discarded file.
func encode(batches []arrow.RecordBatch, s, streams int, codec string) error {
	w, err := parquetio.NewWriter(io.Discard, batches[0].Schema(), parquetio.Options{Compression: codec, RowGroupRows: rowGroupRows})
	if err != nil {
		return err
	}
	for i := s; i < len(batches); i += streams {
		if err := w.Write(batches[i]); err != nil {
			return err
		}
	}
	_, err = w.Close()
	return err
}

func readStream(path string) ([]arrow.RecordBatch, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := ipc.NewReader(f, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, err
	}
	defer r.Release()
	var out []arrow.RecordBatch
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		out = append(out, rec)
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no record batch", path)
	}
	return out, nil
}

// cpuSeconds is the process's user and system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

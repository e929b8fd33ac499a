// Package kafka is the kafka scenario of quiverbench: it measures the
// Kafka sink end to end. It starts a broker (--broker: an embedded kfake
// broker, internal/devbroker, by default; or a real Apache Kafka broker,
// internal/realkafka, over PLAINTEXT or over SASL_SSL with SCRAM-SHA-512,
// or over both in one run, where the sink and both bare clients connect
// alike; 6 partitions), an in-process Schema Registry (srfake) and one
// Quiver server in process with a JSON and an Avro Kafka endpoint
// (key_column id, murmur2), and drives each with the standard workload
// (bench.Putter: generated and connected once). In the same run it
// produces the very records the sink produces (serialized beforehand with
// writers/kafka/kafkaenc, Avro with the same registered schema id) with a
// bare sarama AsyncProducer (the sink's producer settings) and a franz-go
// client, to the same broker, all three without compression. It prints
// records/s, MB/s (record key and value bytes), the ratio of each to bare
// sarama over the same listener at each format and stream count, and the
// CPU time per record of this process (the client measured; for Quiver its
// Flight client and the server too) and of the real broker's JVM; with
// both listeners, also what SASL_SSL costs each client against PLAINTEXT,
// both measured in every run:
//
//	go run ./bench/cmd/quiverbench --scenario kafka --streams 1,4 --rows 200000
//	go run ./bench/cmd/quiverbench --scenario kafka --broker kafka-sasl_ssl
//	go run ./bench/cmd/quiverbench --scenario kafka --broker kafka,kafka-sasl_ssl --rows 1000000
//
// kfake keeps records in memory and serves every request on one goroutine
// sharing the machine with the clients: the figures compare clients with
// one another, they do not predict a real cluster's throughput. Topics are
// truncated (DeleteRecords) after every measurement to keep memory flat.
package kafka

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/quiver-ingest/quiver/bench"
	"github.com/quiver-ingest/quiver/server"
	"github.com/quiver-ingest/quiver/writers/kafka/kafkaenc/srfake"
)

// partitions of every benchmark topic.
const partitions = 6

// formats are the value formats measured; each is a Quiver endpoint of
// that name producing to topic "quiver-<format>".
var formats = []string{"json", "avro"}

// Targets of the report.
const (
	targetQuiver = "quiver"
	targetSarama = "sarama"
	targetFranz  = "franz-go"
)

// Options are the scenario's flags.
type Options struct {
	bench.Load
	Broker string
}

// Register adds --streams, --rows, --runs and --broker to fs.
func (o *Options) Register(fs *flag.FlagSet) {
	o.Load.Register(fs, 200_000)
	fs.StringVar(&o.Broker, "broker", brokerKfake, "the broker: kfake (embedded, in process), kafka (a real Apache Kafka broker of internal/realkafka, PLAINTEXT; needs Java 17), kafka-sasl_ssl (the same broker over TLS with SCRAM-SHA-512) or kafka,kafka-sasl_ssl (both listeners of one broker, alternating in every run)")
}

// Scenario is the kafka scenario for bench.Main.
func Scenario() bench.Scenario {
	return bench.NewScenario[Options]("kafka", "Kafka sink (JSON, Avro) on kfake or a real broker (--broker) vs bare sarama and franz-go", run)
}

// row is one line of the report.
type row struct {
	format, target string
	listener       string // the --broker name the target connected through
	streams        int
	recsPerSec     float64
	mbPerSec       float64 // key and value bytes
	// cpuPerRec and brokerPerRec: CPU time per record of this process
	// (the client; for Quiver its Flight client and the server too) and
	// of the broker's; -1 when unknown.
	cpuPerRec, brokerPerRec time.Duration
}

// summarize is the medians of spans that each sent n records: records/s,
// and the CPU time per record of this process and the broker.
func summarize(spans []span, n float64) row {
	var rates, cpu, broker []float64
	for _, s := range spans {
		rates = append(rates, n/s.wall.Seconds())
		cpu = append(cpu, float64(perRecord(s.cpu, n)))
		broker = append(broker, float64(perRecord(s.brokerCPU, n)))
	}
	median := func(xs []float64) time.Duration {
		if slices.Min(xs) < 0 {
			return -1 // unknown in some run
		}
		return time.Duration(bench.Median(xs))
	}
	return row{recsPerSec: bench.Median(rates), cpuPerRec: median(cpu), brokerPerRec: median(broker)}
}

// perRecord is CPU time d spread over n records, -1 when d is unknown.
func perRecord(d time.Duration, n float64) time.Duration {
	if d < 0 {
		return -1
	}
	return time.Duration(float64(d) / n)
}

func run(ctx context.Context, o Options, out, log io.Writer) (err error) {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	names, err := parseBrokers(o.Broker)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	var topics []string
	for _, f := range formats {
		topics = append(topics, quiverTopic(f), baselineTopic(targetSarama, f), baselineTopic(targetFranz, f))
	}
	cluster, err := startCluster(ctx, names, topics, log)
	if err != nil {
		return err
	}
	defer cluster.close()
	reg := srfake.New()
	defer reg.Close()
	dir, remove, err := bench.TempDir("quiverbench-kafka", "", false, log)
	if err != nil {
		return err
	}
	defer remove()
	srv, err := startServer(ctx, dir, cluster, reg.URL)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, bench.Stop(ctx, srv)) }()

	recs := map[string]*records{}
	for _, f := range formats {
		if recs[f], err = serialize(ctx, f, o.Rows, reg.URL); err != nil {
			return err
		}
		fmt.Fprintf(log, "kafka: %s records: %d per stream, %.1f bytes each (key and value)\n", f, recs[f].len(), recs[f].meanBytes())
	}
	fmt.Fprintf(log, "kafka: generating %d rows of the standard workload for Quiver\n", o.Rows)
	putter, err := bench.NewPutter(srv.FlightAddr(), o.Rows)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, putter.Close()) }()

	m := cluster.meter
	type target struct {
		name, topic string
		listener    listener
		measure     func() (span, error)
	}
	targetsOf := func(f string, streams int) []target {
		var targets []target
		for _, l := range cluster.listeners {
			targets = append(targets,
				target{targetQuiver, quiverTopic(f), l, func() (span, error) {
					start := m.start()
					if _, err := putter.Measure(ctx, endpointName(f, l), streams); err != nil {
						return span{}, err
					}
					return m.since(start), nil
				}},
				target{targetSarama, baselineTopic(targetSarama, f), l, func() (span, error) {
					return produceSarama(ctx, m, l, baselineTopic(targetSarama, f), recs[f], streams)
				}},
				target{targetFranz, baselineTopic(targetFranz, f), l, func() (span, error) {
					return produceFranz(ctx, m, l, baselineTopic(targetFranz, f), recs[f], streams)
				}})
		}
		return targets
	}
	// One unmeasured round first: a real broker's JVM compiles its hot
	// paths during the first seconds of load, which would otherwise
	// count against whichever target ran first; Quiver's connection is
	// set up in it.
	for _, f := range formats {
		for _, t := range targetsOf(f, o.Streams[0]) {
			if _, err := t.measure(); err != nil {
				return fmt.Errorf("warm-up: %s %s over %s: %w", t.name, f, t.listener.name, err)
			}
			if err := truncate(ctx, cluster.admin, t.topic); err != nil {
				return err
			}
		}
	}

	var rows []row
	for _, streams := range o.Streams {
		for _, f := range formats {
			// Each run measures every target over every listener once, in
			// an order that alternates from run to run, so that a change
			// of load on the machine touches them alike; every topic is
			// truncated after each measurement.
			targets := targetsOf(f, streams)
			spans := make([][]span, len(targets))
			sent := float64(recs[f].len() * streams) // records per measurement
			for run := range o.Runs {
				for k := range targets {
					i := k
					if run%2 == 1 {
						i = len(targets) - 1 - k
					}
					t := targets[i]
					s, err := t.measure()
					if err != nil {
						return fmt.Errorf("%s %s over %s, %d streams: %w", t.name, f, t.listener.name, streams, err)
					}
					if err := truncate(ctx, cluster.admin, t.topic); err != nil {
						return err
					}
					fmt.Fprintf(log, "kafka: %s %s over %s, %d stream(s), run %d: %.0f records/s, CPU µs/record %s here, %s in the broker\n",
						t.name, f, t.listener.name, streams, run+1, sent/s.wall.Seconds(), micros(perRecord(s.cpu, sent)), micros(perRecord(s.brokerCPU, sent)))
					spans[i] = append(spans[i], s)
				}
			}
			for i, t := range targets {
				r := summarize(spans[i], sent)
				r.format, r.target, r.listener, r.streams = f, t.name, t.listener.name, streams
				r.mbPerSec = r.recsPerSec * recs[f].meanBytes() / 1e6
				rows = append(rows, r)
			}
		}
	}
	return report(out, rows)
}

func quiverTopic(format string) string           { return "quiver-" + format }
func baselineTopic(target, format string) string { return target + "-" + format }

// endpointName is the Quiver endpoint of format over listener l.
func endpointName(format string, l listener) string { return format + "." + l.name }

// startServer serves one Kafka endpoint per format and listener
// (endpointName), keyed by id, producing to quiverTopic(format) on c.
func startServer(ctx context.Context, dir string, c *cluster, registry string) (*server.Server, error) {
	var b strings.Builder
	for _, l := range c.listeners {
		for _, f := range formats {
			fmt.Fprintf(&b, "  - name: %s\n    sink: kafka\n    kafka: {%s, topic: %s, format: %s, key_column: id, schema_registry: {url: %q}}\n",
				endpointName(f, l), l.yaml(), quiverTopic(f), f, registry)
		}
	}
	return bench.Start(ctx, dir, dir, b.String())
}

// truncate deletes every record of topic, so kfake frees its memory.
func truncate(ctx context.Context, adm *kadm.Client, topic string) error {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	resp, err := adm.DeleteRecords(ctx, ends.Offsets())
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("truncate %s: %w", topic, err)
	}
	return nil
}

// micros prints a CPU time per record in µs, "-" when unknown (negative).
func micros(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(d)/float64(time.Microsecond))
}

// report prints one line per format, stream count, listener and target,
// with the ratio of each target's records/s to bare sarama's over the same
// listener; with both listeners, each target's SASL_SSL rate against its
// PLAINTEXT rate follows.
func report(w io.Writer, rows []row) error {
	tw := bench.NewTable(w)
	fmt.Fprintln(tw, "format\tstreams\tbroker\ttarget\trecords/s\tMB/s\tvs sarama\tCPU µs/record here\tin the broker\t")
	rate := func(format string, streams int, listener, target string) float64 {
		for _, r := range rows {
			if r.format == format && r.streams == streams && r.listener == listener && r.target == target {
				return r.recsPerSec
			}
		}
		return 0
	}
	var tls []row
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.0f\t%.1f\t%.2fx\t%s\t%s\t\n", r.format, r.streams, r.listener, r.target, r.recsPerSec, r.mbPerSec,
			r.recsPerSec/rate(r.format, r.streams, r.listener, targetSarama), micros(r.cpuPerRec), micros(r.brokerPerRec))
		if r.listener == brokerSASLSSL && rate(r.format, r.streams, brokerKafka, r.target) > 0 {
			tls = append(tls, r)
		}
	}
	if err := tw.Flush(); err != nil || len(tls) == 0 {
		return err
	}
	fmt.Fprintln(w)
	tw = bench.NewTable(w)
	fmt.Fprintln(tw, "format\tstreams\ttarget\tSASL_SSL / PLAINTEXT\t")
	for _, r := range tls {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.2fx\t\n", r.format, r.streams, r.target, r.recsPerSec/rate(r.format, r.streams, brokerKafka, r.target))
	}
	return tw.Flush()
}

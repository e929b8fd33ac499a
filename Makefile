# Quiver — build, run, test, bench.
#   make run    build and serve examples/quickstart.yaml on 127.0.0.1:8815
#   make test   run every test: vet, Go tests with the race detector (unit,
#               conformance, end-to-end), then the Python interop suite
#               (Spark and delta-rs read what bin/quiver writes); CI runs it
#   make bench-delta  Quiver's Delta append and upsert vs. delta-rs and Spark
#   make bench-optimize Quiver's optimize vs. delta-rs, Spark and pylance compaction
#   make bench-python Python clients (pyarrow, ADBC) vs. a bare Flight server
#   make golden rewrite the reference Delta tables of testdata/delta-golden
#               (Spark + delta-spark and delta-rs, in .venv-golden; needs Java 17)
#   make lance-fixtures rewrite the Lance 2.1/2.2 datasets of testdata/lance-formats

GO        ?= go
BIN       := bin/quiver
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
PKGS      := ./...
TESTFLAGS ?= -race -timeout 15m
GOLDEN_VENV ?= .venv-golden

.PHONY: build run test test-go test-short test-interop venv bench bench-delta bench-optimize bench-lance-merge bench-lance-append bench-collector bench-python lance-probe k8s-schemas generate lint fmt docker clean golden lance-fixtures

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./server/cmd/quiver

run: build
	./$(BIN) serve --config examples/quickstart.yaml

# venv first: the Go tests run moto (the S3 emulator) and the reference
# readers of the scale-out test (delta-rs, pylance, LanceDB) from .venv.
test: venv lint test-go test-interop

# Go only: vet, then every Go test with the race detector. withkafka starts
# one real Apache Kafka broker (internal/realkafka: jars from Maven Central
# cached in .cache/kafka, Java 17) that every test package of the run shares.
# The tests that fence a transactional producer (files tagged !race) then
# run without the race detector against the same broker: sarama races with
# itself on that path (IBM/sarama#2913; writers/kafka/fenced_test.go).
NORACE_TESTS := ^TestFencedCacheIsDropped$$
test-go:
	$(GO) vet $(PKGS)
	$(GO) run ./internal/realkafka/cmd/withkafka sh -c '$(GO) test $(TESTFLAGS) $(PKGS) && $(GO) test -count=1 -timeout 15m -run "$(NORACE_TESTS)" ./writers/kafka'

# Go only, quick: -short (benchmark runs skipped, property tests shortened),
# no race detector, no Python, no real Kafka broker.
test-short:
	$(GO) test -short $(PKGS)

# Rewrite the Kubernetes API schemas of deploy/kubernetes/schemas, which the
# manifests' test validates them against with kubeconform (offline): one
# standalone schema per kind the manifests use, from the PyPI package
# kubernetes-validate (pinned in the script). Run after adding a kind.
k8s-schemas:
	python3 deploy/kubernetes/schemas/generate.py

# Rewrite the Lance 2.1 and 2.2 reference datasets of testdata/lance-formats
# with pylance from .venv (pinned in requirements-test.txt).
lance-fixtures: venv
	.venv/bin/python testdata/lance-formats/generate.py

golden:
	test -x $(GOLDEN_VENV)/bin/python || python3 -m venv $(GOLDEN_VENV)
	$(GOLDEN_VENV)/bin/pip install -q -r testdata/delta-golden/requirements.txt
	$(GOLDEN_VENV)/bin/python testdata/delta-golden/generate.py

# The pytest suite alone (interop/): Spark and delta-rs against bin/quiver.
# interop/run creates .venv from requirements-test.txt when it is missing or
# stale; Spark's Delta jars are cached in .cache/ivy after the first run.
# Pass pytest options with PYTEST_ARGS, e.g. PYTEST_ARGS='test_roundtrip.py -k spark -x'.
test-interop: build
	QUIVER_BIN=$(CURDIR)/$(BIN) interop/run $(PYTEST_ARGS)

# The interop suite's virtual environment alone.
venv:
	interop/run --venv-only

bench: build
	$(GO) run ./bench/cmd/quiverbench --baseline --streams 1,4

# Install the LanceDB probe (node + npm) into the user cache folder: the
# Lance tests do it on first use; quiverbench's LanceDB references need it
# installed (they never run npm themselves).
lance-probe:
	$(GO) test -count=1 -run '^TestInstall$$' ./internal/lanceprobe/probetest

# Quiver's Delta append and upsert (bin/quiver through Flight) against delta-rs
# in process and Spark MERGE INTO (local[2]), same run (bench/delta_vs_reference.py;
# see docs/benchmarks.md). Not part of make test. Options with BENCH_ARGS, e.g.
# BENCH_ARGS='--runs 5 --json delta.json' or BENCH_ARGS=--no-spark.
bench-delta: build venv
	$(GO) build -o bin/parquetencode ./bench/cmd/parquetencode
	.venv/bin/python bench/delta_vs_reference.py --quiver $(CURDIR)/$(BIN) --parquetencode $(CURDIR)/bin/parquetencode $(BENCH_ARGS)

# 1,000 small files x 2,000 rows compacted by Quiver's optimize action, delta-rs
# optimize.compact() and Spark OPTIMIZE on local[2], on copies of one table, and
# 200 Lance fragments x 10,000 rows by Quiver and pylance compact_files()
# (bench/optimize_vs_reference.py; see docs/benchmarks.md). Not part of make test.
bench-optimize: build venv
	.venv/bin/python bench/optimize_vs_reference.py --quiver $(CURDIR)/$(BIN) $(BENCH_ARGS)

# Lance merge_insert into a dataset of file format 2.2 (pylance's default):
# Quiver (cold and warm key index) against pylance's merge_insert, same run
# (bench/lance_merge_vs_pylance.py; docs/lance.md). Not part of make test.
bench-lance-merge: build venv
	.venv/bin/python bench/lance_merge_vs_pylance.py --quiver $(CURDIR)/$(BIN) $(BENCH_ARGS)

# Lance append from a Python user's seat: pyarrow.flight -> Quiver's lance
# append endpoints against pylance's write_dataset in process, 1 and 4
# writers, same run, with bytes on disk and the server's CPU per million rows
# (bench/lance_append_vs_pylance.py; docs/lance.md). Not part of make test.
bench-lance-append: build venv
	.venv/bin/python bench/lance_append_vs_pylance.py --quiver $(CURDIR)/$(BIN) $(BENCH_ARGS)

# Continuous streams from a fleet of collectors (100 streams x 1,000-row batches
# every 100 ms) into a Delta table while delta-rs polls it, then the same load as
# one auto-commit put per batch (bench/collector_reader.py; docs/benchmarks.md).
# Not part of make test. quiverbench's options with BENCH_ARGS, e.g.
# BENCH_ARGS='--commit-interval 200ms' or BENCH_ARGS='--store s3 --servers 3'.
bench-collector: build venv
	$(GO) build -o bin/quiverbench ./bench/cmd/quiverbench
	.venv/bin/python bench/collector_reader.py --quiverbench $(CURDIR)/bin/quiverbench -- $(BENCH_ARGS)

# Python clients (pyarrow.flight, ADBC's Flight SQL driver, the quiver
# package) into Quiver's discard endpoint against pyarrow.flight into the bare
# arrow-go Flight server (bin/flightbaseline), 1 and 4 client threads
# (bench/python_clients.py; see docs/benchmarks.md). Not part of make test.
bench-python: build venv
	$(GO) build -o bin/flightbaseline ./bench/cmd/flightbaseline
	.venv/bin/python bench/python_clients.py --quiver $(CURDIR)/$(BIN) --baseline $(CURDIR)/bin/flightbaseline $(BENCH_ARGS)

# Regenerate the Go code of the Lance protobuf messages (writers/lance/lancepb)
# from the pinned protos in third_party/lance (see its README.md).
generate:
	$(GO) run ./internal/protogen

# gofmt, go vet and staticcheck (a go.mod tool, pinned there); part of make
# test. The import rules are a test: internal/layering.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

docker:
	docker build -t quiver:$(VERSION) .

clean:
	rm -rf bin

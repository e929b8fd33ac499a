# Quiver — build, run, test, bench.
#   make run    build and serve examples/quickstart.yaml on 127.0.0.1:8815
#   make test   run every test (vet, race detector, conformance, end-to-end)
#   make golden rewrite the reference Delta tables of testdata/delta-golden
#               (Spark + delta-spark and delta-rs, in .venv-golden; needs Java 17)

GO        ?= go
BIN       := bin/quiver
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
PKGS      := ./...
TESTFLAGS ?= -race -timeout 15m
GOLDEN_VENV ?= .venv-golden

.PHONY: build run test test-short bench lint fmt docker clean golden

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./server/cmd/quiver

run: build
	./$(BIN) serve --config examples/quickstart.yaml

test:
	$(GO) vet $(PKGS)
	$(GO) test $(TESTFLAGS) $(PKGS)

test-short:
	$(GO) test -short $(PKGS)

golden:
	test -x $(GOLDEN_VENV)/bin/python || python3 -m venv $(GOLDEN_VENV)
	$(GOLDEN_VENV)/bin/pip install -q -r testdata/delta-golden/requirements.txt
	$(GOLDEN_VENV)/bin/python testdata/delta-golden/generate.py

bench: build
	$(GO) run ./bench/cmd/quiverbench --baseline --streams 1,4

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

docker:
	docker build -t quiver:$(VERSION) .

clean:
	rm -rf bin

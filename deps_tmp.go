package main

import (
	_ "github.com/apache/arrow-go/v18/arrow/flight"
	_ "github.com/apache/arrow-go/v18/arrow/ipc"
	_ "github.com/apache/arrow-go/v18/parquet/pqarrow"
	_ "github.com/apache/arrow-go/v18/arrow/util"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/health"
	_ "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	_ "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	_ "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	_ "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "go.uber.org/goleak"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/sync/semaphore"
	_ "golang.org/x/term"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/parquet-go/parquet-go"
)

func main() {}

package parquetio

import (
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// zstdCodec is the ZSTD codec of the files this package writes. parquet-go's
// own codec uses klauspost/compress at its default level, whose match
// search costs about twice the CPU of the fastest level on the pages
// ingestion writes and gains nothing on them: numbers compress as well
// either way (fewer matches are missed than the search costs), and the
// random strings of real data (ids, names, hashes) have no matches to find,
// only a skewed byte distribution. The fastest level alone skips entropy
// coding of blocks without matches, leaving those strings uncompressed, so
// it is paired with literal entropy coding (WithAllLitEntropyCompression):
// on the standard workload the pages come out within 0.5 % of the default
// level's size at less than half its CPU (docs/delta.md, Performance).
// The output is ordinary ZSTD frames; decoding is parquet-go's.
//
// One encoder serves every writer of the process with GOMAXPROCS
// compressors (EncodeAll waits for a free one): compression is CPU work,
// so more would not go faster, and each holds about 1 MiB of history and
// tables — per open file, as a pool per call would, that is memory the
// budget does not see growing with the streams.
type zstdCodec struct {
	once sync.Once
	enc  *zstd.Encoder
	err  error
}

var fastZstd zstdCodec

func (*zstdCodec) String() string { return "ZSTD" }

func (*zstdCodec) CompressionCodec() format.CompressionCodec { return format.Zstd }

func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	c.once.Do(func() {
		c.enc, c.err = zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithAllLitEntropyCompression(true),
			zstd.WithZeroFrames(true),
			zstd.WithEncoderCRC(false),
		)
	})
	if c.err != nil {
		return nil, c.err
	}
	return c.enc.EncodeAll(src, dst[:0]), nil
}

func (*zstdCodec) Decode(dst, src []byte) ([]byte, error) {
	return parquet.Zstd.Decode(dst, src)
}

package parquetio

import (
	"encoding/binary"
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
// on the standard workload the files come out 1.5 % larger than at the
// default level for about 60 % of its encoding CPU (docs/delta.md, "The
// zstd codec").
// The output is ordinary ZSTD frames; decoding is parquet-go's.
//
// One encoder serves every writer of the process with GOMAXPROCS
// compressors, at most maxZstdCompressors (EncodeAll waits for a free
// one): compression is CPU work, so more would not go faster, and each
// holds its history window and tables — one per concurrent page, as a
// pool would keep them, is memory the budget does not see growing with
// the streams. The window is a page's size (parquet-go's page buffer):
// pages are compressed one by one, so a longer one finds nothing more and
// klauspost's 8 MiB default would cost 8 MiB per compressor.
type zstdCodec struct {
	once sync.Once
	enc  *zstd.Encoder
	err  error
}

// maxZstdCompressors caps the compressors on machines with many cores.
const maxZstdCompressors = 8

// zstdWindow is parquet-go's page buffer size (DefaultPageBufferSize).
const zstdWindow = 256 << 10

var fastZstd zstdCodec

func (*zstdCodec) String() string { return "ZSTD" }

func (*zstdCodec) CompressionCodec() format.CompressionCodec { return format.Zstd }

func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	c.once.Do(func() {
		c.enc, c.err = zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(min(runtime.GOMAXPROCS(0), maxZstdCompressors)),
			zstd.WithWindowSize(zstdWindow),
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

// EncodeRaw frames src as a zstd frame of raw (stored) blocks, which
// every zstd decoder reads, at the cost of a copy: pqfile stores so the
// pages that zstd does not shrink (RFC 8878: a single-segment frame with a
// 4-byte content size and no checksum; blocks of at most 128 KiB, the last
// one flagged).
func (*zstdCodec) EncodeRaw(dst, src []byte) []byte {
	const maxBlock = 128 << 10
	dst = binary.LittleEndian.AppendUint32(dst, 0xFD2FB528) // magic
	dst = append(dst, 2<<6|1<<5)                            // 4-byte content size, single segment
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(src)))
	for {
		n := min(len(src), maxBlock)
		last := uint32(0)
		if n == len(src) {
			last = 1
		}
		h := uint32(n)<<3 | last // block type 0: raw
		dst = append(dst, byte(h), byte(h>>8), byte(h>>16))
		dst = append(dst, src[:n]...)
		if src = src[n:]; last == 1 {
			return dst
		}
	}
}

func (*zstdCodec) Decode(dst, src []byte) ([]byte, error) {
	return parquet.Zstd.Decode(dst, src)
}

package flightsvc

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow/flight"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"

	"github.com/quiver-ingest/quiver/writers"
)

// putTarget is what a DoPut descriptor asks for.
type putTarget struct {
	endpoint string
	// txn is true for a CMD descriptor: the rows join (writer, epoch).
	txn    bool
	writer string
	epoch  int64
	// attempt is the CMD descriptor's "attempt", "" when it names none.
	attempt string
	// ingest is set for a Flight SQL CommandStatementIngest (sqlingest.go).
	ingest *pb.CommandStatementIngest
	// stream is true for a continuous stream's CMD descriptor
	// {"endpoint","writer","stream":true} (stream.go).
	stream bool
}

// cmdDescriptor is the JSON of a transactional DoPut's CMD descriptor.
type cmdDescriptor struct {
	Endpoint *string `json:"endpoint"`
	Writer   *string `json:"writer"`
	Epoch    *int64  `json:"epoch"`
	Attempt  *string `json:"attempt"`
	Stream   *bool   `json:"stream"`
}

// parsePutDescriptor reads a DoPut descriptor: PATH ["<endpoint>"] for an
// auto-commit stream, CMD {"endpoint","writer","epoch"} for a transactional
// one, CMD {"endpoint","writer","stream":true} for a continuous one. Errors are ErrInvalid and name the problem.
func parsePutDescriptor(d *flight.FlightDescriptor) (putTarget, error) {
	if d == nil {
		return putTarget{}, writers.Errorf(writers.ErrInvalid, `doput: the first message carries no flight descriptor: use PATH ["<endpoint>"] or CMD {"endpoint","writer","epoch"}`)
	}
	switch d.GetType() {
	case flight.DescriptorPATH:
		name, err := parsePathDescriptor("doput", d)
		return putTarget{endpoint: name}, err
	case flight.DescriptorCMD:
		if msg, ok, err := sqlCommand(d.GetCmd()); err != nil {
			return putTarget{}, err
		} else if ok {
			return ingestTarget(msg)
		}
		const what = "doput: CMD descriptor"
		var c cmdDescriptor
		if err := decodeStrict(what, d.GetCmd(), &c); err != nil {
			return putTarget{}, err
		}
		name, err := requireString(what, "endpoint", c.Endpoint)
		if err != nil {
			return putTarget{}, err
		}
		if c.Stream != nil && *c.Stream {
			return streamTarget(what, name, c)
		}
		ref := txnRef{c.Writer, c.Epoch, c.Attempt}
		writer, epoch, err := ref.check(what)
		if err != nil {
			return putTarget{}, err
		}
		if _, err := ref.withAttempt(context.Background(), what); err != nil {
			return putTarget{}, err
		}
		t := putTarget{endpoint: name, txn: true, writer: writer, epoch: epoch}
		if c.Attempt != nil {
			t.attempt = *c.Attempt
		}
		return t, nil
	default:
		return putTarget{}, writers.Errorf(writers.ErrInvalid, `doput: descriptor type %s is not supported: use PATH ["<endpoint>"] or CMD {"endpoint","writer","epoch"}`, d.GetType())
	}
}

// streamTarget is the target of a continuous stream's CMD descriptor
// {"endpoint","writer","stream":true}, which names no epoch or attempt.
func streamTarget(what, endpoint string, c cmdDescriptor) (putTarget, error) {
	if c.Epoch != nil || c.Attempt != nil {
		return putTarget{}, writers.Errorf(writers.ErrInvalid, `%s: a continuous stream ("stream":true) names no "epoch" or "attempt": its batches carry seqs`, what)
	}
	writer, err := requireString(what, "writer", c.Writer)
	if err != nil {
		return putTarget{}, err
	}
	if err := checkWriter(what, writer); err != nil {
		return putTarget{}, err
	}
	return putTarget{endpoint: endpoint, stream: true, writer: writer}, nil
}

// parsePathDescriptor returns the endpoint named by a PATH descriptor
// ["<endpoint>"]; what prefixes errors.
func parsePathDescriptor(what string, d *flight.FlightDescriptor) (string, error) {
	if d.GetType() != flight.DescriptorPATH {
		return "", writers.Errorf(writers.ErrInvalid, `%s: expected a PATH descriptor ["<endpoint>"], got type %s`, what, d.GetType())
	}
	if p := d.GetPath(); len(p) != 1 || p[0] == "" {
		first := ""
		if len(p) > 0 {
			first = p[0]
		}
		return "", writers.Errorf(writers.ErrInvalid, `%s: the descriptor path must be one element, the endpoint name; got %d elements, the first %q`, what, len(p), shown(first))
	}
	return d.GetPath()[0], nil
}

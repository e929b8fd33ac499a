package flightsvc

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/flightsvc/ipccheck"
	"github.com/quiver-ingest/quiver/writers"
)

// FuzzPutDescriptor: any CMD descriptor is either accepted with a valid
// target or refused with ErrInvalid; parsing never panics.
func FuzzPutDescriptor(f *testing.F) {
	for _, seed := range []string{
		`{"endpoint":"events","writer":"job-1","epoch":7}`,
		`{"endpoint":"events","writer":"job-1","epoch":-1}`,
		`{"endpoint":"events","writer":"","epoch":1}`,
		`{"endpoint":"events","writer":"w","epoch":1.5}`,
		`{"endpoint":"events","writer":"w","epoch":1,"x":1}`,
		`{"endpoint":"events"`,
		`[]`, ``, `null`, `{} {}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, cmd []byte) {
		got, err := parsePutDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd})
		if err != nil {
			if !errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("%q: error %v is not ErrInvalid", cmd, err)
			}
			return
		}
		if !got.txn || got.endpoint == "" || got.writer == "" || got.epoch < 0 {
			t.Fatalf("%q: accepted as %+v", cmd, got)
		}
	})
}

// FuzzActionBody: the commit body, the richest one, decodes or is refused
// with ErrInvalid.
func FuzzActionBody(f *testing.F) {
	for _, seed := range []string{
		`{"writer":"w","epoch":1,"descriptors":{"events":["AAEC"]}}`,
		`{"writer":"w","epoch":1,"descriptors":{"events":"AAEC"}}`,
		`{"writer":"w","epoch":1,"ttl_s":5}`,
		`{"writer":1}`, `{`, ``, `"x"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var b struct {
			Writer      *string             `json:"writer"`
			Epoch       *int64              `json:"epoch"`
			Attempt     *string             `json:"attempt"`
			Descriptors map[string][]string `json:"descriptors"`
		}
		err := decodeStrict("action commit", body, &b)
		if err == nil {
			_, _, err = txnRef{b.Writer, b.Epoch, b.Attempt}.check("action commit")
		}
		if err == nil {
			_, err = txnRef{b.Writer, b.Epoch, b.Attempt}.withAttempt(t.Context(), "action commit")
		}
		if err != nil && !errors.Is(err, writers.ErrInvalid) {
			t.Fatalf("%q: error %v is not ErrInvalid", body, err)
		}
	})
}

// FuzzDoPutMessages: a stream of a schema message and a batch message,
// any bytes, is refused or decodes into batches that, once validated, can
// be read value by value. Nothing panics, nothing allocates without bound
// (a fatal out of memory would end the fuzzer) and nothing stays
// allocated. The hostile streams of hostile_fixtures_test.go are seeds.
func FuzzDoPutMessages(f *testing.F) {
	rec := Rows(3)
	valid := Encode(HostileSchema(), rec)
	rec.Release()
	f.Add(valid[0].DataHeader, valid[1].DataHeader, valid[1].DataBody)
	for _, msgs := range HostileStreams() {
		batch := &flight.FlightData{}
		if len(msgs) > 1 {
			batch = msgs[1]
		}
		f.Add(msgs[0].DataHeader, batch.DataHeader, batch.DataBody)
	}
	f.Fuzz(func(t *testing.T, schema, header, body []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		src := &messages{msgs: []*flight.FlightData{
			{FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"events"}}, DataHeader: schema},
			{DataHeader: header, DataBody: body},
		}}
		g := &recvGuard{stream: src, limit: 1 << 20, dictLimit: 1 << 20, mem: mem, ctx: context.Background(), acct: testShare().Account(nil)}
		rdr, err := flight.NewRecordReader(g, ipc.WithAllocator(mem))
		if err != nil {
			return
		}
		defer rdr.Release()
		g.schema = rdr.Schema()
		for rdr.Next() {
			rec := rdr.RecordBatch()
			if ipccheck.Validate(rec) != nil {
				return
			}
			for _, col := range rec.Columns() {
				for i := range col.Len() {
					_ = col.ValueStr(i)
				}
			}
		}
	})
}

// messages is a flight.DataStreamReader over msgs.
type messages struct{ msgs []*flight.FlightData }

func (m *messages) Recv() (*flight.FlightData, error) {
	if len(m.msgs) == 0 {
		return nil, io.EOF
	}
	fd := m.msgs[0]
	m.msgs = m.msgs[1:]
	return fd, nil
}

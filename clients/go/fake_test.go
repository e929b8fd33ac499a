package quiver

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// fakeServer speaks the Quiver Flight conventions just far enough to test
// the client in isolation: endpoint "sink" accepts rows, endpoint "reject"
// fails after its first batch, and actions answer from a little state.
type fakeServer struct {
	flight.BaseFlightServer
	mem   memory.Allocator
	token string

	mu        sync.Mutex       // guards the fields below
	staged    map[string]int64 // "writer@epoch" → rows staged
	committed map[string]int64 // writer → last committed epoch
	lastErr   error            // the last DoPut's error
	commits   int64
	lastBody  []byte // the last action body
	lastCmd   []byte // the last DoPut's CMD descriptor
	begins    int    // begin actions answered so far (attempt ids)
	busy      int    // begins to refuse as "still ending: retry shortly"
	streams   fakeStreams

	wg sync.WaitGroup // continuous streams' reading goroutines
}

// startFake runs a fake on 127.0.0.1:0 (stopped in t.Cleanup) and returns
// its address.
func startFake(t *testing.T, token string) (*fakeServer, string) {
	t.Helper()
	f := &fakeServer{
		mem: memory.NewCheckedAllocator(memory.DefaultAllocator), token: token,
		staged: map[string]int64{}, committed: map[string]int64{},
		streams: fakeStreams{writers: map[string]*fakeWriter{}, failAfter: -1, commit: make(chan struct{})},
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(DefaultMaxMessageBytes),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := f.auth(ctx); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := f.auth(ss.Context()); err != nil {
				return err
			}
			return h(srv, ss)
		}))
	flight.RegisterFlightServiceServer(gs, f)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(lis) }()
	t.Cleanup(func() {
		gs.Stop()
		<-done
		f.wg.Wait()
		f.mem.(*memory.CheckedAllocator).AssertSize(t, 0)
	})
	return f, lis.Addr().String()
}

func (f *fakeServer) auth(ctx context.Context) error {
	if f.token == "" {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) != 1 || v[0] != "Bearer "+f.token {
		return status.Error(codes.Unauthenticated, "fake: missing or wrong bearer token")
	}
	return nil
}

func (f *fakeServer) DoPut(stream flight.FlightService_DoPutServer) error {
	err := f.doPut(stream)
	f.mu.Lock()
	f.lastErr = err
	f.mu.Unlock()
	return err
}

func (f *fakeServer) doPut(stream flight.FlightService_DoPutServer) error {
	rdr, err := flight.NewRecordReader(stream, ipc.WithAllocator(f.mem))
	if err != nil {
		return err
	}
	desc := rdr.LatestFlightDescriptor()
	var cmd struct {
		Endpoint, Writer string
		Epoch            int64
		Stream           bool
	}
	switch desc.GetType() {
	case flight.DescriptorPATH:
		cmd.Endpoint = desc.GetPath()[0]
	case flight.DescriptorCMD:
		f.mu.Lock()
		f.lastCmd = desc.GetCmd()
		f.mu.Unlock()
		if err := json.Unmarshal(desc.GetCmd(), &cmd); err != nil {
			rdr.Release()
			return status.Errorf(codes.InvalidArgument, "fake: bad cmd: %v", err)
		}
	}
	if cmd.Stream {
		return f.doStream(stream, rdr, cmd.Endpoint, cmd.Writer)
	}
	defer rdr.Release()
	var batches, rows int64
	for rdr.Next() {
		if cmd.Endpoint == "reject" && batches == 1 {
			return status.Error(codes.InvalidArgument, "fake: endpoint reject refuses a second batch")
		}
		n := rdr.RecordBatch().NumRows()
		rows += n
		if err := sendAck(stream, map[string]int64{"batch": batches, "rows": n}); err != nil {
			return err
		}
		batches++
	}
	if err := rdr.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if desc.GetType() == flight.DescriptorPATH {
		f.commits++
		return sendAck(stream, map[string]any{"committed": true, "rows": rows, "version": f.commits})
	}
	if last, ok := f.committed[cmd.Writer]; ok && cmd.Epoch <= last {
		return sendAck(stream, map[string]any{"replayed": true, "rows": rows, "writer": cmd.Writer, "epoch": cmd.Epoch})
	}
	f.staged[fmt.Sprintf("%s@%d", cmd.Writer, cmd.Epoch)] += rows
	return sendAck(stream, map[string]any{"staged": true, "rows": rows, "writer": cmd.Writer, "epoch": cmd.Epoch})
}

func sendAck(stream flight.FlightService_DoPutServer, v any) error {
	meta, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return stream.Send(&flight.PutResult{AppMetadata: meta})
}

func (f *fakeServer) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	var body struct {
		Writer, Endpoint string
		Epoch            int64
		Descriptors      map[string][][]byte
	}
	if err := json.Unmarshal(a.Body, &body); err != nil {
		return status.Errorf(codes.InvalidArgument, "fake: bad body: %v", err)
	}
	f.mu.Lock()
	f.lastBody = a.Body
	key := fmt.Sprintf("%s@%d", body.Writer, body.Epoch)
	rows, known := f.staged[key]
	last, committed := f.committed[body.Writer]
	replayed := committed && body.Epoch <= last
	var res any
	switch a.Type {
	case "begin":
		if f.busy > 0 {
			f.busy--
			f.mu.Unlock()
			return status.Errorf(codes.FailedPrecondition, "fake: txn %s: 1 stream(s) of the fenced attempt are still ending: retry shortly", key)
		}
		f.begins++
		res = map[string]any{"writer": body.Writer, "epoch": body.Epoch, "state": "open", "attempt": fmt.Sprintf("%016x", f.begins)}
	case "precommit", "status":
		res = map[string]any{"writer": body.Writer, "epoch": body.Epoch, "state": "precommitted",
			"participants": []map[string]any{{"endpoint": "sink", "rows": rows, "descriptor": []byte(key)}}}
	case "commit":
		if known {
			f.committed[body.Writer] = body.Epoch
			delete(f.staged, key)
		}
		eps := map[string]any{"sink": map[string]any{"version": 7}}
		for ep := range body.Descriptors {
			eps[ep] = map[string]any{}
		}
		res = map[string]any{"writer": body.Writer, "epoch": body.Epoch, "state": "committed",
			"endpoints": eps, "replayed": replayed}
	case "rollback":
		delete(f.staged, key)
		res = map[string]any{"writer": body.Writer, "epoch": body.Epoch, "state": "aborted"}
	case "committed-epoch":
		var epoch any
		if committed {
			epoch = last
		}
		res = map[string]any{"endpoint": body.Endpoint, "writer": body.Writer, "epoch": epoch}
	case "endpoints":
		res = []map[string]any{{"name": "sink", "sink": "discard", "schema": []map[string]any{{"name": "id", "type": "int64", "nullable": true}}}}
	case "health":
		res = map[string]any{"status": "ok", "endpoints": map[string]string{"sink": "ok"}}
	default:
		f.mu.Unlock()
		return status.Errorf(codes.InvalidArgument, "fake: unknown action %q", a.Type)
	}
	f.mu.Unlock()
	out, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return stream.Send(&flight.Result{Body: out})
}

// lastPutErr returns the error the last DoPut ended with.
func (f *fakeServer) lastPutErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastErr
}

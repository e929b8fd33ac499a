// Package flightsvc is Quiver's Arrow Flight service: descriptors, DoPut
// sessions and acks, DoAction dispatch, ListFlights/GetFlightInfo/GetSchema,
// per-call permission checks and the one mapping from error classes to gRPC
// codes ([Status]).
//
// It imports the writers contract and the txn coordinator, never a sink
// package. The wire conventions it implements (descriptors, acks, action
// bodies and results) are specified in docs/flight.md; the choices that
// page leaves open are documented on [Service.DoPut], [Service.DoAction],
// [Service.GetSchema] and [Service.Handshake].
package flightsvc

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/quiver-ingest/quiver/flightsvc/groupcommit"
	"github.com/quiver-ingest/quiver/internal/descseal"
	"github.com/quiver-ingest/quiver/internal/membudget"
	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
)

// Endpoint is one configured endpoint.
type Endpoint struct {
	Name   string
	Sink   string // sink kind ("discard", "delta", ...)
	Mode   string // write mode, "" when the sink has none
	Writer writers.Writer
	// Maintenance runs the optimize and vacuum actions; nil when the sink
	// has no table maintenance.
	Maintenance Maintenance
	// Memory is the endpoint's share of the memory budget, the one its
	// sink was given (writers.Env.Memory); nil means a share of
	// Options.Memory capped at Options.EndpointBufferBytes.
	Memory *membudget.Share
	// Stream is the group commit cadence of the endpoint's continuous
	// streams; nil when its sink takes none (writers.Sink.Streams).
	Stream *writers.GroupCommit
}

// Token is one bearer token and what it may do.
type Token struct {
	Name      string
	Secret    string
	Endpoints []string // endpoint names or "*"
	Actions   []string // action types or "*"
	// Writers are the writer names the token's transactions and
	// continuous streams may use: names, or prefixes ending in "*";
	// empty: any. Committed epochs are recorded per endpoint and writer,
	// whoever committed them: tenants sharing an endpoint each get names
	// of their own, or one could make another's epochs replays.
	Writers []string
}

// mayUseWriter reports whether the token may use writer name w.
func (t *Token) mayUseWriter(w string) bool {
	if len(t.Writers) == 0 {
		return true
	}
	return slices.ContainsFunc(t.Writers, func(p string) bool {
		prefix, wild := strings.CutSuffix(p, "*")
		return p == w || wild && strings.HasPrefix(w, prefix)
	})
}

// Caller is the token as the coordinator sees it: the owner of the
// transactions it begins. A token granted every endpoint and every
// action ("*" for both) is an admin, which sees and acts on every
// transaction; any other sees only its own.
func (t *Token) Caller() txn.Caller {
	return txn.Caller{Owner: t.Name, Admin: slices.Contains(t.Endpoints, "*") && slices.Contains(t.Actions, "*")}
}

// Options configure the service.
type Options struct {
	// Endpoints served; names must be unique and match
	// ^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$.
	Endpoints []Endpoint
	// Coordinator runs transactions; required. Build it over
	// EndpointWriters(Endpoints).
	Coordinator *txn.Coordinator
	// Allocator for decoding incoming batches; nil means memory.DefaultAllocator.
	Allocator memory.Allocator
	// Logger; nil discards.
	Logger *slog.Logger
	// Registerer for quiver_ endpoint metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// MaxMessageBytes bounds one IPC message body; a larger batch is
	// ResourceExhausted naming limits.max_message_bytes. Zero means 64 MiB.
	// The gRPC server's receive limit must be at least
	// [Service.MaxRecvMsgSize].
	MaxMessageBytes int64
	// Memory is the process's memory budget, which streams wait for
	// before reading each message; nil means a budget of 1 GiB (admission
	// timeout 30 s, 256 open files).
	Memory *membudget.Budget
	// EndpointBufferBytes caps the share of an endpoint built without
	// Endpoint.Memory. Zero means 512 MiB.
	EndpointBufferBytes int64
	// StreamIdleTimeout cancels and rolls back a stream that receives no
	// message for this long once its schema is read, or whose client takes
	// no ack for this long; zero means never.
	StreamIdleTimeout time.Duration
	// FirstMessageTimeout fails a stream that has not sent its descriptor
	// and schema this long after it opened; zero means 10 s.
	FirstMessageTimeout time.Duration
	// ClientMaxStreams bounds the DoPut streams one client (a token, or a
	// peer host without auth) has open at once; zero means 128.
	ClientMaxStreams int
	// ClientMemoryBytes bounds what one client's streams hold of Memory;
	// zero means half of it.
	ClientMemoryBytes int64
	// Tokens; nil disables auth.
	Tokens []Token
	// DescriptorKey seals the descriptors precommit and status return and
	// verifies those handed to commit (package descseal). Servers that hand
	// descriptors to each other must share it. The zero Key means a random
	// key of this Service: its descriptors verify only here.
	DescriptorKey descseal.Key
	// Version is the server's version, which Flight SQL's GetSqlInfo
	// reports; "" means "dev".
	Version string
	// SQLCatalog and SQLDBSchema name the one catalog and database schema
	// Flight SQL lists the endpoints under, which an ingest may give; ""
	// means "quiver" and "public".
	SQLCatalog, SQLDBSchema string
}

// MaxMessageBytesLimit is the largest Options.MaxMessageBytes, 1023 MiB:
// the gRPC receive limit derived from it (MaxRecvMsgSize) must stay within
// math.MaxInt32, gRPC clients' default send limit and protobuf's message
// size limit.
const MaxMessageBytesLimit = 1<<30 - recvSlack

const (
	defaultMaxMessageBytes     = 64 << 20
	defaultEndpointBufferBytes = 512 << 20
	defaultMemoryBytes         = 1 << 30
	defaultMaxOpenFiles        = 256
	defaultAdmissionTimeout    = 30 * time.Second
	// recvSlack is what a FlightData message may carry beyond its IPC body
	// (flatbuffer header, descriptor, app metadata).
	recvSlack = 1 << 20
)

var endpointName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// Service implements flight.FlightServer. All methods are safe for
// concurrent use.
type Service struct {
	pb.UnimplementedFlightServiceServer

	coord  *txn.Coordinator
	mem    memory.Allocator
	log    *slog.Logger
	maxMsg int64
	idle   time.Duration
	// first is limits.first_message_timeout.
	first time.Duration
	// clients counts each client's streams and bounds its memory.
	clients *clients
	eps     map[string]*endpoint
	names   []string // endpoint names, sorted
	tokens  []Token  // nil: auth disabled
	actions []action // in ListActions order
	key     descseal.Key
	sql     flight.FlightServer // the Flight SQL side (sql.go)
	// sqlCatalog and sqlDBSchema are Options.SQLCatalog and SQLDBSchema.
	sqlCatalog, sqlDBSchema string
	// connTxns are the Flight SQL transactions open per connection (sqltxn.go).
	connTxns connTxns

	// receivers counts DoPut receive goroutines, which may outlive their
	// handler by the time gRPC takes to cancel the stream (see pump).
	receivers sync.WaitGroup
}

// endpoint is an Endpoint with its memory share and metrics.
type endpoint struct {
	Endpoint
	m endpointMetrics
	// group runs the group commits of its continuous streams; nil when it
	// takes none.
	group *groupcommit.Committer
}

// New validates opts and builds the service. Validation errors wrap
// writers.ErrInvalid and name the offending endpoint or token; a metric
// that cannot be registered is reported as is.
func New(opts Options) (*Service, error) {
	if opts.Coordinator == nil {
		return nil, writers.Errorf(writers.ErrInvalid, "flightsvc: Options.Coordinator is required")
	}
	if opts.MaxMessageBytes < 0 || opts.EndpointBufferBytes < 0 {
		return nil, writers.Errorf(writers.ErrInvalid, "flightsvc: MaxMessageBytes and EndpointBufferBytes must not be negative")
	}
	if opts.MaxMessageBytes > MaxMessageBytesLimit {
		return nil, writers.Errorf(writers.ErrInvalid, "flightsvc: MaxMessageBytes %d is above the limit of %d", opts.MaxMessageBytes, MaxMessageBytesLimit)
	}
	s := &Service{
		coord:  opts.Coordinator,
		mem:    opts.Allocator,
		log:    opts.Logger,
		maxMsg: orDefault(opts.MaxMessageBytes, defaultMaxMessageBytes),
		idle:   opts.StreamIdleTimeout,
		first:  cmp.Or(opts.FirstMessageTimeout, defaultFirstMessageTimeout),
		eps:    make(map[string]*endpoint, len(opts.Endpoints)),
		key:    opts.DescriptorKey,
	}
	if s.key.IsZero() {
		s.key = descseal.GenerateKey()
	}
	if s.mem == nil {
		s.mem = memory.DefaultAllocator
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	gm, err := groupcommit.NewMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	budget := opts.Memory
	if budget == nil {
		if budget, err = membudget.New(membudget.Options{Limit: defaultMemoryBytes, MaxOpenFiles: defaultMaxOpenFiles, AdmissionTimeout: defaultAdmissionTimeout}); err != nil {
			return nil, err
		}
	}
	s.clients = &clients{budget: budget, maxStreams: opts.ClientMaxStreams, memory: opts.ClientMemoryBytes, m: map[string]*client{}}
	if s.clients.maxStreams <= 0 {
		s.clients.maxStreams = defaultClientMaxStreams
	}
	if s.clients.memory <= 0 {
		s.clients.memory = max(budget.Limit()/2, s.recvCap())
	}
	share := orDefault(opts.EndpointBufferBytes, defaultEndpointBufferBytes)
	for _, e := range opts.Endpoints {
		switch {
		case !endpointName.MatchString(e.Name):
			return nil, writers.Errorf(writers.ErrInvalid, "flightsvc: endpoint name %q must match %s", e.Name, endpointName)
		case s.eps[e.Name] != nil:
			return nil, writers.Errorf(writers.ErrInvalid, "flightsvc: endpoint %q is defined twice", e.Name)
		case e.Writer == nil:
			return nil, writers.Errorf(writers.ErrInvalid, "flightsvc: endpoint %q has no writer", e.Name)
		}
		if e.Memory == nil {
			e.Memory = budget.Share(e.Name, share)
		}
		if e.Memory.Limit() < s.maxMsg {
			return nil, writers.Errorf(writers.ErrInvalid, "flightsvc: endpoint %q: its memory share of %d bytes is below MaxMessageBytes %d: one message could never be read", e.Name, e.Memory.Limit(), s.maxMsg)
		}
		ep := &endpoint{Endpoint: e, m: m.forEndpoint(e.Name)}
		if e.Stream != nil {
			if ep.group, err = groupcommit.New(groupcommit.Options{Endpoint: e.Name, Writer: e.Writer, Config: *e.Stream, Metrics: gm, Log: s.log}); err != nil {
				s.StopStreams(context.Background())
				return nil, err
			}
		}
		s.eps[e.Name] = ep
		s.names = append(s.names, e.Name)
	}
	sort.Strings(s.names)
	s.actions = s.actionTable()
	if err := s.setTokens(opts.Tokens); err != nil {
		return nil, err
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s.sqlCatalog, s.sqlDBSchema = cmp.Or(opts.SQLCatalog, "quiver"), cmp.Or(opts.SQLDBSchema, "public")
	if s.sql, err = newSQLServer(s, opts.Version); err != nil {
		return nil, err
	}
	return s, nil
}

func orDefault(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

// EndpointWriters returns the txn.Endpoints view of eps, for building the
// coordinator that Options.Coordinator needs.
func EndpointWriters(eps []Endpoint) txn.Endpoints {
	ws := make(writerSet, len(eps))
	for _, e := range eps {
		ws[e.Name] = e.Writer
	}
	return ws
}

type writerSet map[string]writers.Writer

func (ws writerSet) Writer(name string) (writers.Writer, bool) {
	w, ok := ws[name]
	return w, ok
}

// Register registers the Flight service on gs. gs must accept messages of
// MaxRecvMsgSize bytes.
func (s *Service) Register(gs *grpc.Server) { flight.RegisterFlightServiceServer(gs, s) }

// MaxRecvMsgSize is the gRPC receive limit the server must set
// (grpc.MaxRecvMsgSize): MaxMessageBytes plus room for the message's
// header and metadata. gRPC rejects a larger message itself, before the
// service sees it, with its own ResourceExhausted message; a body between
// MaxMessageBytes and this cap reaches the service, whose error names
// limits.max_message_bytes. The cap is what a stream reserves of the
// memory budget before each message: all that one message, hostile or
// not, can make the server buffer.
func (s *Service) MaxRecvMsgSize() int { return int(s.recvCap()) }

func (s *Service) recvCap() int64 { return s.maxMsg + recvSlack }

// Close stops the continuous streams (StopStreams, if not done before)
// and waits for the DoPut receive goroutines that outlived their
// handlers. A stream that fails while its receiver is blocked in Recv ends
// its handler at once; gRPC then cancels the stream and the receiver
// returns, releasing what it holds. Call Close after the gRPC server has
// stopped, before checking or freeing the allocator. Close is idempotent.
func (s *Service) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
	defer cancel()
	s.StopStreams(ctx)
	s.receivers.Wait()
}

// StopStreams ends every continuous stream with Unavailable (their
// clients resume elsewhere or after the restart) and publishes what they
// wrote in one last group commit per endpoint, within ctx. Call it before
// stopping the gRPC server gracefully: continuous streams do not end on
// their own. It returns the endpoints whose last commit did not end in
// time. It is idempotent.
func (s *Service) StopStreams(ctx context.Context) error {
	for _, ep := range s.eps {
		if ep.group != nil {
			ep.group.Stop() // every endpoint's last commit at once
		}
	}
	var errs []error
	for _, ep := range s.eps {
		if ep.group != nil {
			errs = append(errs, ep.group.Close(ctx))
		}
	}
	return errors.Join(errs...)
}

// endpoint returns the endpoint called name if the caller may use it. The
// permission is checked first: a token limited to some endpoints gets
// PermissionDenied for any other name, known or not, so it cannot probe
// which endpoints exist; only a caller that may use every endpoint gets the
// ErrNotFound error listing them.
func (s *Service) endpoint(ctx context.Context, name string) (*endpoint, error) {
	if err := s.allowEndpoint(ctx, name); err != nil {
		return nil, err
	}
	if e, ok := s.eps[name]; ok {
		return e, nil
	}
	return nil, writers.Errorf(writers.ErrNotFound, "unknown endpoint %q (this server has: %s)", shown(name), listOrNone(s.names))
}

// Health probes every endpoint's sink (writers.Writer.Check) concurrently:
// name → nil or the error. It returns when every probe has, so ctx should
// carry a deadline.
func (s *Service) Health(ctx context.Context) map[string]error { return s.probe(ctx, s.names) }

// probe is Health for the endpoints names.
func (s *Service) probe(ctx context.Context, names []string) map[string]error {
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		out = make(map[string]error, len(names))
	)
	for _, name := range names {
		wg.Go(func() {
			err := s.eps[name].Writer.Check(ctx)
			mu.Lock()
			out[name] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

package flightsvc

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/quiver-ingest/quiver/internal/descseal"
	"github.com/quiver-ingest/quiver/internal/redact"
	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
)

// action is one DoAction type.
type action struct {
	name string
	desc string // one line, for ListActions
	// run decodes body and returns the JSON-encodable result.
	run func(ctx context.Context, body []byte) (any, error)
}

func (s *Service) actionTable() []action {
	return []action{
		{"begin", `start a new attempt of a transaction, fencing the current one (resume: keep a precommitted one) {"writer","epoch","ttl_s"?,"resume"?}`, s.begin},
		{"precommit", `make a transaction's staged rows durable and return their descriptors {"writer","epoch","attempt"?}`, s.precommit},
		{"commit", `publish a precommitted transaction, with descriptors handed over from other servers {"writer","epoch","attempt"?,"descriptors"?}`, s.commit},
		{"rollback", `discard a transaction's staged rows (only the named attempt's) {"writer","epoch","attempt"?,"give_up"?}`, s.rollback},
		{"status", `show a transaction's state, attempt, participants and deadline {"writer","epoch"}`, s.status},
		{"committed-epoch", `read a writer's last committed epoch from an endpoint's sink {"endpoint","writer"}`, s.committedEpoch},
		{"endpoints", `list the endpoints: name, sink, mode and schema {}`, s.endpointsAction},
		{"health", `probe the sink of every endpoint the caller may use, and the transaction journal {}`, s.healthAction},
		{"optimize", `compact an endpoint's table: small files into large ones, deleted rows dropped {"endpoint","target_file_bytes"?}`, s.optimize},
		{"vacuum", `delete files no version inside the retention references {"endpoint","retention_hours"?,"dry_run"?}`, s.vacuum},
	}
}

func (s *Service) findAction(name string) *action {
	for i := range s.actions {
		if s.actions[i].name == name {
			return &s.actions[i]
		}
	}
	return nil
}

func (s *Service) actionNames() []string {
	names := make([]string, len(s.actions))
	for i, a := range s.actions {
		names[i] = a.name
	}
	return names
}

// ListActions lists every action type with a one-line description.
func (s *Service) ListActions(_ *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	for _, a := range s.actions {
		if err := stream.Send(&flight.ActionType{Type: a.name, Description: a.desc}); err != nil {
			return err
		}
	}
	return nil
}

// DoAction runs one action and answers one Result whose body is the JSON
// result (docs/flight.md, "Actions"). Bodies are strict JSON objects:
// unknown fields, wrong types and missing required fields are
// InvalidArgument naming the field; an empty body counts as {}. An unknown
// action type is InvalidArgument listing the known ones.
func (s *Service) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	if n, limit := len(a.GetBody()), maxActionBody(a.GetType()); n > limit {
		return Status(writers.Errorf(writers.ErrInvalid, "action %q: a body of %d bytes is over the limit of %d", shown(a.GetType()), n, limit))
	}
	if ok, err := s.sqlDoAction(a, stream); ok {
		return Status(err)
	}
	ctx := stream.Context()
	act := s.findAction(a.GetType())
	if act == nil {
		return Status(writers.Errorf(writers.ErrInvalid, "unknown action %q (known: %s)", shown(a.GetType()), strings.Join(s.actionNames(), ", ")))
	}
	if err := s.allowAction(ctx, act.name); err != nil {
		return Status(err)
	}
	ctx, err := s.withAccess(ctx)
	if err != nil {
		return Status(err)
	}
	res, err := act.run(withConn(ctx), a.GetBody())
	if err != nil {
		return Status(err)
	}
	body, err := json.Marshal(res)
	if err != nil {
		return Status(err)
	}
	return stream.Send(&flight.Result{Body: body})
}

// Results.
type (
	txnHead struct {
		Writer string    `json:"writer"`
		Epoch  int64     `json:"epoch"`
		State  txn.State `json:"state"`
		// Attempt names the attempt the answer is about (omitted for a
		// replay answered without one).
		Attempt  string `json:"attempt,omitempty"`
		Replayed bool   `json:"replayed,omitempty"`
	}
	participantJSON struct {
		Endpoint string `json:"endpoint"`
		Rows     int64  `json:"rows"`
		// Descriptor is base64; set once precommitted.
		Descriptor *string `json:"descriptor,omitempty"`
		// Version is set once committed, unless the sink has none.
		Version *int64 `json:"version,omitempty"`
	}
	precommitResult struct {
		txnHead
		Participants []participantJSON `json:"participants"`
	}
	versionJSON struct {
		Version *int64 `json:"version,omitempty"`
	}
	commitResult struct {
		txnHead
		Endpoints map[string]versionJSON `json:"endpoints"`
	}
	statusResult struct {
		txnHead
		Participants []participantJSON `json:"participants"`
		Deadline     *time.Time        `json:"deadline,omitempty"`
	}
	committedEpochResult struct {
		Endpoint string `json:"endpoint"`
		Writer   string `json:"writer"`
		Epoch    *int64 `json:"epoch"` // null: never committed
	}
	endpointJSON struct {
		Name   string      `json:"name"`
		Sink   string      `json:"sink"`
		Mode   string      `json:"mode"`
		Schema []fieldJSON `json:"schema,omitempty"`
		// Maintenance lists the maintenance actions the endpoint supports
		// ("optimize", "vacuum"; omitted when none).
		Maintenance []string `json:"maintenance,omitempty"`
	}
	fieldJSON struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		Nullable bool   `json:"nullable"`
	}
	healthResult struct {
		Status    string            `json:"status"` // ok | degraded
		Endpoints map[string]string `json:"endpoints"`
		// Journal is "ok" or why transactions cannot be journaled.
		Journal string `json:"journal"`
	}
)

func head(st txn.Status) txnHead {
	return txnHead{Writer: st.Writer, Epoch: st.Epoch, State: st.State, Attempt: st.Attempt, Replayed: st.Replayed}
}

// participants describes st's participants, with their descriptors sealed
// (descseal) once precommitted.
func (s *Service) participants(st txn.Status) []participantJSON {
	out := make([]participantJSON, 0, len(st.Participants))
	for _, p := range st.Participants {
		pj := participantJSON{Endpoint: p.Endpoint, Rows: p.Rows}
		if st.State == txn.StatePrecommitted || st.State == txn.StateCommitted {
			sealed := s.key.Seal(descseal.Scope{Endpoint: p.Endpoint, Writer: st.Writer, Epoch: st.Epoch, Attempt: st.Attempt}, p.Descriptor)
			d := base64.StdEncoding.EncodeToString(sealed)
			pj.Descriptor = &d
		}
		if st.State == txn.StateCommitted && p.Version != writers.NoVersion {
			pj.Version = &p.Version
		}
		out = append(out, pj)
	}
	return out
}

// decodeTxnRef decodes a {"writer","epoch","attempt"?} body and returns
// the writer, the epoch and ctx naming the attempt (txn.WithAttempt).
func decodeTxnRef(ctx context.Context, what string, body []byte) (context.Context, string, int64, error) {
	var b txnRef
	if err := decodeStrict(what, body, &b); err != nil {
		return ctx, "", 0, err
	}
	writer, epoch, err := b.check(what)
	if err != nil {
		return ctx, "", 0, err
	}
	ctx, err = b.withAttempt(ctx, what)
	return ctx, writer, epoch, err
}

func (s *Service) begin(ctx context.Context, body []byte) (any, error) {
	const what = "action begin"
	var b struct {
		Writer     *string `json:"writer"`
		Epoch      *int64  `json:"epoch"`
		TTLSeconds *int64  `json:"ttl_s"`
		Resume     bool    `json:"resume"`
	}
	if err := decodeStrict(what, body, &b); err != nil {
		return nil, err
	}
	writer, epoch, err := txnRef{Writer: b.Writer, Epoch: b.Epoch}.check(what)
	if err != nil {
		return nil, err
	}
	var ttl time.Duration
	if b.TTLSeconds != nil {
		const maxTTLSeconds = int64(txn.MaxTTL / time.Second)
		if *b.TTLSeconds < 0 || *b.TTLSeconds > maxTTLSeconds {
			return nil, writers.Errorf(writers.ErrInvalid, `%s: field "ttl_s" must be from 0 (the server's txn.ttl) to %d (%s), got %d`, what, maxTTLSeconds, txn.MaxTTL, *b.TTLSeconds)
		}
		ttl = time.Duration(*b.TTLSeconds) * time.Second
	}
	begin := s.coord.Begin
	if b.Resume {
		begin = s.coord.Adopt
	}
	st, err := begin(ctx, writer, epoch, ttl)
	if err != nil {
		return nil, fmt.Errorf("%s %s@%d: %w", what, writer, epoch, err)
	}
	return head(st), nil
}

func (s *Service) precommit(ctx context.Context, body []byte) (any, error) {
	const what = "action precommit"
	ctx, writer, epoch, err := decodeTxnRef(ctx, what, body)
	if err != nil {
		return nil, err
	}
	st, err := s.coord.Precommit(ctx, writer, epoch)
	if err != nil {
		return nil, fmt.Errorf("%s %s@%d: %w", what, writer, epoch, err)
	}
	return precommitResult{txnHead: head(st), Participants: s.participants(st)}, nil
}

func (s *Service) commit(ctx context.Context, body []byte) (any, error) {
	const what = "action commit"
	var b struct {
		Writer      *string             `json:"writer"`
		Epoch       *int64              `json:"epoch"`
		Attempt     *string             `json:"attempt"`
		Descriptors map[string][]string `json:"descriptors"`
	}
	if err := decodeStrict(what, body, &b); err != nil {
		return nil, err
	}
	ref := txnRef{b.Writer, b.Epoch, b.Attempt}
	writer, epoch, err := ref.check(what)
	if err != nil {
		return nil, err
	}
	if ctx, err = ref.withAttempt(ctx, what); err != nil {
		return nil, err
	}
	handed, attempts, err := s.unseal(ctx, what, writer, epoch, b.Descriptors)
	if err != nil {
		return nil, err
	}
	ctx = txn.WithHandedAttempts(ctx, attempts)

	start := time.Now()
	st, err := s.coord.Commit(ctx, writer, epoch, handed)
	elapsed := time.Since(start).Seconds()
	if err != nil {
		// Count the failure against the endpoints the transaction knows.
		if known, serr := s.coord.Status(ctx, writer, epoch); serr == nil {
			s.countCommit(known, elapsed, resultFailed)
		}
		return nil, fmt.Errorf("%s %s@%d: %w", what, writer, epoch, err)
	}
	result := resultCommitted
	if st.Replayed {
		result = resultReplayed
	}
	s.countCommit(st, elapsed, result)

	res := commitResult{txnHead: head(st), Endpoints: make(map[string]versionJSON, len(st.Participants))}
	for _, p := range st.Participants {
		var v versionJSON
		if p.Version != writers.NoVersion {
			v.Version = &p.Version
		}
		res.Endpoints[p.Endpoint] = v
	}
	return res, nil
}

// unseal decodes and verifies the descriptors handed to a commit of
// writer@epoch (endpoint → base64 sealed descriptors) and returns the raw
// ones, in order, and the attempts they were sealed for. Every descriptor
// must have been sealed, with this server's descriptor key, for its
// endpoint and this transaction: any other is PermissionDenied naming the
// endpoint and index, before the coordinator sees any.
func (s *Service) unseal(ctx context.Context, what, writer string, epoch int64, encoded map[string][]string) (map[string][]writers.Descriptor, map[string][]string, error) {
	handed := make(map[string][]writers.Descriptor, len(encoded))
	attempts := make(map[string][]string, len(encoded))
	for _, name := range slices.Sorted(maps.Keys(encoded)) {
		if _, err := s.endpoint(ctx, name); err != nil {
			return nil, nil, fmt.Errorf("%s: descriptors: %w", what, err)
		}
		scope := descseal.Scope{Endpoint: name, Writer: writer, Epoch: epoch}
		for i, e := range encoded[name] {
			sealed, err := base64.StdEncoding.DecodeString(e)
			if err != nil {
				return nil, nil, writers.Errorf(writers.ErrInvalid, "%s: descriptors[%q][%d] is not valid base64: %w", what, name, i, err)
			}
			d, attempt, err := s.key.Open(scope, sealed)
			if err != nil {
				return nil, nil, writers.Errorf(writers.ErrPermissionDenied, "%s %s@%d: descriptors[%q][%d] (endpoint %q) is refused: %w (pass descriptors exactly as precommit answered them, from servers sharing txn.descriptor_key_file)", what, writer, epoch, name, i, name, err)
			}
			handed[name] = append(handed[name], d)
			attempts[name] = append(attempts[name], attempt)
		}
	}
	return handed, attempts, nil
}

func (s *Service) countCommit(st txn.Status, seconds float64, result string) {
	for _, p := range st.Participants {
		if e, ok := s.eps[p.Endpoint]; ok {
			e.m.commit.Observe(seconds)
			e.m.commits.WithLabelValues(result).Inc()
		}
	}
}

func (s *Service) rollback(ctx context.Context, body []byte) (any, error) {
	const what = "action rollback"
	var b struct {
		Writer  *string `json:"writer"`
		Epoch   *int64  `json:"epoch"`
		Attempt *string `json:"attempt"`
		GiveUp  bool    `json:"give_up"` // also give up the replay the epoch owes
	}
	if err := decodeStrict(what, body, &b); err != nil {
		return nil, err
	}
	ref := txnRef{Writer: b.Writer, Epoch: b.Epoch, Attempt: b.Attempt}
	writer, epoch, err := ref.check(what)
	if err != nil {
		return nil, err
	}
	if ctx, err = ref.withAttempt(ctx, what); err != nil {
		return nil, err
	}
	rollback := s.coord.Rollback
	if b.GiveUp {
		rollback = s.coord.GiveUp
	}
	st, err := rollback(ctx, writer, epoch)
	if err != nil {
		return nil, fmt.Errorf("%s %s@%d: %w", what, writer, epoch, err)
	}
	return head(st), nil
}

func (s *Service) status(ctx context.Context, body []byte) (any, error) {
	const what = "action status"
	ctx, writer, epoch, err := decodeTxnRef(ctx, what, body)
	if err != nil {
		return nil, err
	}
	st, err := s.coord.Status(ctx, writer, epoch)
	if err != nil {
		return nil, fmt.Errorf("%s %s@%d: %w", what, writer, epoch, err)
	}
	res := statusResult{txnHead: head(st), Participants: s.participants(st)}
	if !st.Deadline.IsZero() && (st.State == txn.StateOpen || st.State == txn.StatePrecommitted) {
		res.Deadline = &st.Deadline
	}
	return res, nil
}

func (s *Service) committedEpoch(ctx context.Context, body []byte) (any, error) {
	const what = "action committed-epoch"
	var b struct {
		Endpoint *string `json:"endpoint"`
		Writer   *string `json:"writer"`
	}
	if err := decodeStrict(what, body, &b); err != nil {
		return nil, err
	}
	name, err := requireString(what, "endpoint", b.Endpoint)
	if err != nil {
		return nil, err
	}
	writer, err := requireString(what, "writer", b.Writer)
	if err != nil {
		return nil, err
	}
	if err := checkWriter(what, writer); err != nil {
		return nil, err
	}
	if _, err := s.endpoint(ctx, name); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	epoch, ok, err := s.coord.CommittedEpoch(ctx, name, writer)
	if err != nil {
		return nil, fmt.Errorf("%s: endpoint %q, writer %q: %w", what, name, writer, err)
	}
	res := committedEpochResult{Endpoint: name, Writer: writer}
	if ok {
		res.Epoch = &epoch
	}
	return res, nil
}

// endpointsAction lists the endpoints the caller may use. An endpoint
// whose schema cannot be read is listed without one.
func (s *Service) endpointsAction(ctx context.Context, body []byte) (any, error) {
	if err := decodeStrict("action endpoints", body, &struct{}{}); err != nil {
		return nil, err
	}
	out := make([]endpointJSON, 0, len(s.names))
	for _, name := range s.names {
		if s.allowEndpoint(ctx, name) != nil {
			continue
		}
		e := s.eps[name]
		ej := endpointJSON{Name: name, Sink: e.Sink, Mode: e.Mode}
		if e.Maintenance != nil {
			ej.Maintenance = e.Maintenance.Ops().Names()
		}
		schema, err := writers.SchemaOf(ctx, e.Writer)
		if err != nil {
			s.log.Warn("endpoints: cannot read the schema", "endpoint", name, "err", err)
		}
		if schema != nil {
			ej.Schema = schemaJSON(schema)
		}
		out = append(out, ej)
	}
	return out, nil
}

func schemaJSON(schema *arrow.Schema) []fieldJSON {
	out := make([]fieldJSON, len(schema.Fields()))
	for i, f := range schema.Fields() {
		out[i] = fieldJSON{Name: f.Name, Type: f.Type.String(), Nullable: f.Nullable}
	}
	return out
}

func (s *Service) healthAction(ctx context.Context, body []byte) (any, error) {
	if err := decodeStrict("action health", body, &struct{}{}); err != nil {
		return nil, err
	}
	var names []string
	for _, name := range s.names {
		if s.allowEndpoint(ctx, name) == nil {
			names = append(names, name)
		}
	}
	res := healthResult{Status: "ok", Endpoints: make(map[string]string, len(names)), Journal: "ok"}
	if err := s.coord.JournalHealth(); err != nil {
		res.Status, res.Journal = "degraded", redact.Text(err.Error())
	}
	for name, err := range s.probe(ctx, names) {
		if err != nil {
			res.Status = "degraded"
			res.Endpoints[name] = redact.Text(err.Error())
			continue
		}
		res.Endpoints[name] = "ok"
	}
	return res, nil
}

// maxActionBody bounds an action's body before it is decoded (JSON decodes
// to several times its bytes): commit carries the descriptors other
// servers precommitted, every other action a few fields.
func maxActionBody(typ string) int {
	if typ == "commit" {
		return 16 << 20
	}
	return 1 << 20
}

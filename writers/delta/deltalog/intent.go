package deltalog

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/quiver-ingest/quiver/writers"
)

// intent is what a commit writes and what it read, for conflict checks
// (see Commit).
type intent struct {
	actions   []Action
	opts      CommitOptions
	readVer   *int64
	blind     bool
	metadata  bool
	protocol  bool
	txns      map[string]bool // appIds written
	domains   map[string]bool
	removes   map[string]bool // paths removed
	readFiles map[string]bool
	readAll   bool
	carried   map[string]bool // re-added paths whose row ids came from read
	// written is what the last encode wrote after commitInfo (actions with
	// row ids assigned), which the checkpoint replays.
	written []Action
}

func newIntent(read *Snapshot, actions []Action, opts CommitOptions) (*intent, error) {
	actions = withSchemaFeatures(read, normalized(actions))
	in := &intent{
		actions: actions, opts: opts,
		txns: map[string]bool{}, domains: map[string]bool{}, removes: map[string]bool{}, readFiles: map[string]bool{},
		readAll: opts.ReadWholeTable, carried: carriedRowIDs(read, actions),
	}
	for _, p := range opts.ReadFiles {
		in.readFiles[p] = true
	}
	target := read
	if read != nil {
		v := read.Version
		in.readVer = &v
		target = read.clone()
	} else {
		target = newSnapshot()
	}
	for i, a := range actions {
		switch {
		case a.empty():
			return nil, writers.Errorf(writers.ErrInvalid, "delta: commit: action %d is empty", i)
		case a.CommitInfo != nil:
			return nil, writers.Errorf(writers.ErrInvalid, "delta: commit: do not pass commitInfo, Commit writes it")
		case a.MetaData != nil:
			if in.metadata {
				return nil, writers.Errorf(writers.ErrInvalid, "delta: commit: more than one metaData action")
			}
			in.metadata = true
		case a.Protocol != nil:
			if in.protocol {
				return nil, writers.Errorf(writers.ErrInvalid, "delta: commit: more than one protocol action")
			}
			in.protocol = true
		case a.Txn != nil:
			if in.txns[a.Txn.AppID] {
				return nil, writers.Errorf(writers.ErrInvalid, "delta: commit: two txn actions for appId %q", a.Txn.AppID)
			}
			in.txns[a.Txn.AppID] = true
		case a.DomainMetadata != nil:
			in.domains[a.DomainMetadata.Domain] = true
		case a.Remove != nil:
			in.removes[a.Remove.Path] = true
		}
	}
	// Check the table as it will be after this commit (a metaData or
	// protocol in it applies).
	target.apply(target.Version+1, actions)
	if read == nil && (!in.protocol || !in.metadata) {
		return nil, writers.Errorf(writers.ErrInvalid, "delta: commit: version 0 needs protocol and metaData actions (use NewTable)")
	}
	if err := CheckWritable(target); err != nil {
		return nil, err
	}
	if strings.EqualFold(target.Metadata.Configuration["delta.appendOnly"], "true") {
		for _, a := range actions {
			if a.Remove != nil && a.Remove.DataChange {
				return nil, fmt.Errorf("delta: table is append-only (delta.appendOnly=true): removing %q is not allowed: %w", a.Remove.Path, ErrUnsupported)
			}
		}
	}
	in.blind = !in.readAll && len(in.readFiles) == 0 && len(in.removes) == 0
	return in, nil
}

// normalized returns actions with the required-but-empty fields the
// protocol wants as {} or [] rather than null (add.partitionValues,
// remove.partitionValues when extendedFileMetadata says it is present,
// metaData.partitionColumns/configuration/format.options), without
// modifying the caller's actions.
func normalized(actions []Action) []Action {
	out := slices.Clone(actions)
	for i, a := range out {
		switch {
		case a.Add != nil && a.Add.PartitionValues == nil:
			c := *a.Add
			c.PartitionValues = map[string]*string{}
			out[i] = Action{Add: &c}
		case a.Remove != nil && a.Remove.ExtendedFileMetadata && a.Remove.PartitionValues == nil:
			c := *a.Remove
			c.PartitionValues = map[string]*string{}
			out[i] = Action{Remove: &c}
		case a.MetaData != nil:
			c := *a.MetaData
			c.PartitionColumns = nonNilSlice(c.PartitionColumns)
			c.Configuration = nonNilMap(c.Configuration)
			c.Format.Options = nonNilMap(c.Format.Options)
			if c.Format.Provider == "" {
				c.Format.Provider = "parquet"
			}
			out[i] = Action{MetaData: &c}
		}
	}
	return out
}

// encode renders the commit for an attempt on top of snap (nil: version 0).
func (in *intent) encode(ctx context.Context, store Store, snap *Snapshot) ([]byte, error) {
	now := time.Now().UnixMilli()
	ci := &CommitInfo{
		Timestamp:           now,
		Operation:           in.opts.Operation,
		OperationParameters: in.opts.OperationParameters,
		OperationMetrics:    in.opts.OperationMetrics,
		ReadVersion:         in.readVer,
		IsolationLevel:      isolationLevel(snap),
		IsBlindAppend:       &in.blind,
		EngineInfo:          in.opts.EngineInfo,
		TxnID:               in.opts.TxnID,
	}
	if ci.Operation == "" {
		ci.Operation = "WRITE"
	}
	if ci.EngineInfo == "" {
		ci.EngineInfo = "quiver"
	}
	if ci.TxnID == "" {
		ci.TxnID = uuid.NewString()
		in.opts.TxnID = ci.TxnID // stable across retries
	}
	if ci.OperationParameters == nil {
		mode := "Append"
		if in.readAll {
			mode = "Overwrite"
		}
		var cols []string
		if snap != nil {
			cols = snap.Metadata.PartitionColumns
		}
		ci.OperationParameters = map[string]any{"mode": mode, "partitionBy": partitionByParam(cols)}
	}
	if snap != nil && strings.EqualFold(snap.Metadata.Configuration["delta.enableInCommitTimestamps"], "true") {
		ict, err := nextInCommitTimestamp(ctx, store, snap, now)
		if err != nil {
			return nil, err
		}
		ci.InCommitTimestamp = &ict
		ci.Timestamp = ict
	}
	actions, err := in.withRowIDs(snap)
	if err != nil {
		return nil, err
	}
	if p, conf := in.tableAfter(snap); rowTrackingOn(p, conf) && strings.EqualFold(conf["delta.enableRowTracking"], "true") {
		// Every Quiver commit keeps the row ids of the rows it moves; Spark
		// tags its commits that do so.
		ci.Tags = map[string]string{rowTrackingPreservedTag: "true"}
	}
	in.written = actions
	return EncodeCommit(append([]Action{{CommitInfo: ci}}, actions...))
}

// withRowIDs returns the actions to write on top of snap (nil: version
// 0), with row ids assigned when the table tracks rows. They are assigned
// per attempt: a rebase over a concurrent commit moves the high-water mark
// and the version.
func (in *intent) withRowIDs(snap *Snapshot) ([]Action, error) {
	if !in.rowTracking(snap) {
		return in.actions, nil
	}
	hwm, version := int64(-1), int64(0)
	if snap != nil {
		version = snap.Version + 1
		var err error
		if hwm, err = snap.RowIDHighWaterMark(); err != nil {
			return nil, err
		}
	}
	return assignRowIDs(liveRowIDs(in.actions, snap, in.carried), hwm, version)
}

// rowTracking reports whether the commit on top of snap (nil: version 0)
// must assign row ids, as the table is after its own protocol and
// metaData.
func (in *intent) rowTracking(snap *Snapshot) bool {
	return rowTrackingOn(in.tableAfter(snap))
}

// tableAfter returns the protocol and configuration of the table after
// the commit on top of snap (nil: version 0).
func (in *intent) tableAfter(snap *Snapshot) (Protocol, map[string]string) {
	var p Protocol
	var conf map[string]string
	if snap != nil {
		p, conf = snap.Protocol, snap.Metadata.Configuration
	}
	for _, a := range in.actions {
		switch {
		case a.Protocol != nil:
			p = *a.Protocol
		case a.MetaData != nil:
			conf = a.MetaData.Configuration
		}
	}
	return p, conf
}

func isolationLevel(snap *Snapshot) string {
	if snap != nil && snap.Metadata.Configuration["delta.isolationLevel"] == "WriteSerializable" {
		return "WriteSerializable"
	}
	return "Serializable"
}

// nextInCommitTimestamp is max(now, previous commit's ICT + 1).
func nextInCommitTimestamp(ctx context.Context, store Store, snap *Snapshot, now int64) (int64, error) {
	ci, ok := snap.CommitInfo()
	if !ok {
		actions, err := ReadCommit(ctx, store, snap.Version)
		if err != nil {
			return 0, fmt.Errorf("delta: in-commit timestamp needs commit %d: %w", snap.Version, err)
		}
		for _, a := range actions {
			if a.CommitInfo != nil {
				ci = a.CommitInfo
			}
		}
	}
	if ci != nil && ci.InCommitTimestamp != nil {
		return max(now, *ci.InCommitTimestamp+1), nil
	}
	return now, nil
}

// rebase reads the commits that won since snap, checks each against this
// commit, and returns snap advanced over them.
func (in *intent) rebase(ctx context.Context, store Store, snap *Snapshot) (*Snapshot, error) {
	winners, err := commitsAfter(ctx, store, snap.Version)
	if err != nil {
		return nil, fmt.Errorf("delta: commit: reading the commits after version %d: %w", snap.Version, err)
	}
	next := snap.clone()
	for i, actions := range winners {
		v := snap.Version + 1 + int64(i)
		if err := in.check(v, actions, isolationLevel(next)); err != nil {
			return nil, err
		}
		next.apply(v, actions)
	}
	if err := CheckWritable(next); err != nil {
		return nil, err
	}
	return next, nil
}

// check applies the conflict rules to one winning commit.
func (in *intent) check(v int64, winner []Action, isolation string) error {
	winnerBlind := false
	for _, a := range winner {
		if a.CommitInfo != nil && a.CommitInfo.IsBlindAppend != nil {
			winnerBlind = *a.CommitInfo.IsBlindAppend
		}
	}
	reads := in.readAll || len(in.readFiles) > 0
	for _, a := range winner {
		switch {
		case a.Protocol != nil && in.protocol:
			return &ConflictError{Kind: ConflictProtocol, WinnerVersion: v}
		case a.MetaData != nil:
			return &ConflictError{Kind: ConflictMetadata, WinnerVersion: v}
		case a.DomainMetadata != nil && in.domains[a.DomainMetadata.Domain]:
			return &ConflictError{Kind: ConflictDomain, WinnerVersion: v, Path: a.DomainMetadata.Domain}
		case a.Txn != nil && in.txns[a.Txn.AppID]:
			return &ConflictError{Kind: ConflictTxn, WinnerVersion: v, AppID: a.Txn.AppID, TxnVersion: a.Txn.Version}
		case a.Add != nil && a.Add.DataChange && reads && !(isolation == "WriteSerializable" && winnerBlind):
			return &ConflictError{Kind: ConflictAppend, WinnerVersion: v, Path: a.Add.Path}
		case a.Remove != nil && in.removes[a.Remove.Path]:
			return &ConflictError{Kind: ConflictDeleteDelete, WinnerVersion: v, Path: a.Remove.Path}
		case a.Remove != nil && a.Remove.DataChange && (in.readAll || in.readFiles[a.Remove.Path]):
			return &ConflictError{Kind: ConflictDeleteRead, WinnerVersion: v, Path: a.Remove.Path}
		}
	}
	return nil
}

// checkpoint writes a checkpoint of the committed version when due. snap
// is the state the commit was based on (nil for version 0).
func (in *intent) checkpoint(ctx context.Context, store Store, snap *Snapshot, v int64) {
	if snap == nil || v == 0 {
		return
	}
	after := snap.clone()
	after.apply(v, in.written)
	interval := in.opts.CheckpointInterval
	if interval <= 0 {
		interval = after.CheckpointInterval()
	}
	if v%int64(interval) != 0 {
		return
	}
	if err := WriteCheckpoint(ctx, store, after, time.Now()); err != nil && in.opts.Logger != nil {
		in.opts.Logger.Warn("delta checkpoint failed; the commit stands", "version", v, "err", err)
	}
}

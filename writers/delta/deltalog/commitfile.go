package deltalog

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// EncodeCommit renders actions as a commit file: one JSON object per line,
// in the given order (put commitInfo first), newline-terminated.
func EncodeCommit(actions []Action) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i, a := range actions {
		if a.empty() {
			return nil, fmt.Errorf("delta: encode commit: action %d has no field set: %w", i, ErrCorrupt)
		}
		if err := enc.Encode(a); err != nil {
			return nil, fmt.Errorf("delta: encode commit: action %d: %w", i, err)
		}
	}
	return buf.Bytes(), nil
}

// DecodeCommit parses a commit file. Blank lines, unknown actions and
// unknown fields are ignored; a commitInfo that does not fit the modelled
// fields is kept empty rather than failing the commit (it is free-form). A
// line that is not a JSON object, or a known action of the wrong shape, is
// an error wrapping ErrCorrupt.
func DecodeCommit(data []byte) ([]Action, error) {
	var out []Action
	err := eachLine(data, func(n int, line []byte) error {
		a, err := decodeAction(line)
		if err != nil {
			return fmt.Errorf("delta: line %d: %w: %w", n, ErrCorrupt, err)
		}
		if !a.empty() {
			out = append(out, a)
		}
		return nil
	})
	return out, err
}

// eachLine calls fn with every non-blank line of data (trimmed) and its
// 1-based number, until fn fails.
func eachLine(data []byte, fn func(n int, line []byte) error) error {
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if line = bytes.TrimSpace(line); len(line) == 0 {
			continue
		}
		if err := fn(n, line); err != nil {
			return err
		}
	}
	return nil
}

func decodeAction(line []byte) (Action, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		return Action{}, err
	}
	var a Action
	var err error
	for key, raw := range fields {
		switch key {
		case "commitInfo":
			a.CommitInfo = new(CommitInfo)
			if json.Unmarshal(raw, a.CommitInfo) != nil {
				*a.CommitInfo = CommitInfo{}
			}
		case "protocol":
			a.Protocol, err = decodeField[Protocol](key, raw)
		case "metaData":
			a.MetaData, err = decodeField[Metadata](key, raw)
		case "txn":
			a.Txn, err = decodeField[Txn](key, raw)
		case "domainMetadata":
			a.DomainMetadata, err = decodeField[DomainMetadata](key, raw)
		case "add":
			a.Add, err = decodeField[Add](key, raw)
		case "remove":
			a.Remove, err = decodeField[Remove](key, raw)
		}
		if err != nil {
			return Action{}, err
		}
	}
	return a, nil
}

// decodeField decodes one known action; JSON null counts as absent.
func decodeField[T any](key string, raw json.RawMessage) (*T, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	v := new(T)
	if err := json.Unmarshal(raw, v); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return v, nil
}

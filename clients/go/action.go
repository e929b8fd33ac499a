package quiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow/flight"
)

// Action runs the DoAction name with body marshalled by encoding/json (a
// json.RawMessage goes as is; nil sends {}) and returns the JSON result.
// Errors from the server keep their gRPC status.
func (c *Client) Action(ctx context.Context, name string, body any) (json.RawMessage, error) {
	payload := []byte("{}")
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("quiver: action %s: encode body: %w", name, err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the result stream if we stop reading early
	stream, err := c.fc.DoAction(ctx, &flight.Action{Type: name, Body: payload})
	if err != nil {
		return nil, fmt.Errorf("quiver: action %s: %w", name, err)
	}
	var result json.RawMessage
	for {
		res, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("quiver: action %s: %w", name, err)
		}
		if result != nil {
			return nil, fmt.Errorf("quiver: action %s: the server sent more than one result (is this a Quiver server?)", name)
		}
		result = json.RawMessage(res.GetBody())
	}
	if result == nil {
		return nil, fmt.Errorf("quiver: action %s: the server sent no result (is this a Quiver server?)", name)
	}
	return result, nil
}

// action runs name and decodes its result into out.
func (c *Client) action(ctx context.Context, name string, body, out any) error {
	raw, err := c.Action(ctx, name, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("quiver: action %s: undecodable result %s: %w", name, raw, err)
	}
	return nil
}

// EndpointInfo describes one endpoint of the server.
type EndpointInfo struct {
	Name string `json:"name"`
	Sink string `json:"sink"`
	Mode string `json:"mode,omitempty"`
	// Schema is the endpoint's schema, nil when none is known yet (the
	// first stream defines it).
	Schema []Field `json:"schema,omitempty"`
	// Maintenance names the maintenance actions the endpoint supports
	// ("optimize", "vacuum"), nil when none.
	Maintenance []string `json:"maintenance,omitempty"`
}

// Field is one column of an endpoint's schema.
type Field struct {
	Name string `json:"name"`
	// Type is the Arrow type as arrow-go prints it ("int64",
	// "timestamp[us, tz=UTC]").
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
}

// Endpoints lists the endpoints the caller's token may use.
func (c *Client) Endpoints(ctx context.Context) ([]EndpointInfo, error) {
	var eps []EndpointInfo
	if err := c.action(ctx, "endpoints", nil, &eps); err != nil {
		return nil, err
	}
	return eps, nil
}

// HealthStatus is the result of the health action.
type HealthStatus struct {
	// Status is "ok" or "degraded".
	Status string `json:"status"`
	// Endpoints maps each endpoint to "ok" or its sink's error (for an
	// endpoint whose sink could not be opened, why).
	Endpoints map[string]string `json:"endpoints"`
	// Journal is "ok" or why the server cannot journal transactions.
	Journal string `json:"journal"`
}

// Health probes every endpoint's sink and the transaction journal.
func (c *Client) Health(ctx context.Context) (HealthStatus, error) {
	var res HealthStatus
	err := c.action(ctx, "health", nil, &res)
	return res, err
}

// CommittedEpoch asks endpoint's sink for the last epoch writer committed;
// ok is false when it never committed there. This is how to reconcile a
// commit whose outcome is unknown (codes.Unknown): if the epoch is there,
// it committed; otherwise commit again or replay it.
func (c *Client) CommittedEpoch(ctx context.Context, endpoint, writer string) (epoch int64, ok bool, err error) {
	var res struct {
		Epoch *int64 `json:"epoch"`
	}
	body := map[string]string{"endpoint": endpoint, "writer": writer}
	if err := c.action(ctx, "committed-epoch", body, &res); err != nil {
		return 0, false, err
	}
	if res.Epoch == nil {
		return 0, false, nil
	}
	return *res.Epoch, true, nil
}

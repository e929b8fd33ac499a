package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"
)

// lockedBuffer collects the server's log lines from its goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

func TestServeCommand(t *testing.T) {
	path := writeConfig(t, "listen: 127.0.0.1:0\nhttp_listen: 127.0.0.1:0\ndata_dir: data\nendpoints: [{name: devnull, sink: discard}]\n")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var logs lockedBuffer
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, []string{"--config", path}, io.Discard, &logs) }()

	// Users and scripts find the bound addresses in the log.
	httpLine := regexp.MustCompile(`msg="http listening" addr=(127\.0\.0\.1:\d+)`)
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var m []string
	for m == nil {
		select {
		case err := <-done:
			t.Fatalf("serve returned early: %v\n%s", err, logs.String())
		case <-deadline:
			t.Fatalf("no http listening line:\n%s", logs.String())
		case <-tick.C:
			m = httpLine.FindStringSubmatch(logs.String())
		}
	}
	if !regexp.MustCompile(`msg="flight listening" addr=127\.0\.0\.1:\d+`).MatchString(logs.String()) {
		t.Errorf("no flight listening line:\n%s", logs.String())
	}
	resp, err := http.Get("http://" + m[1] + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz = %d", resp.StatusCode)
	}
	cancel() // what SIGINT does through main's signal context
	if err := <-done; err != nil {
		t.Errorf("serve after cancel: %v", err)
	}
}

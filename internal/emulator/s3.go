package emulator

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// S3 returns the moto server of this test binary, starting it on first
// use from the project's .venv.
func S3(t testing.TB) *Store {
	t.Helper()
	return get(t, "s3", startMoto)
}

func startMoto() (*Store, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(root, ".venv", "bin", "moto_server")); err != nil {
		return nil, &errMissing{"moto (in the project .venv: make venv)", err}
	}
	// moto_server itself lets racing conditional PUTs both win
	// (moto_serialized.py says why).
	python, script := filepath.Join(root, ".venv", "bin", "python"), filepath.Join(root, "internal", "emulator", "moto_serialized.py")
	srv, err := startServer("moto", func(port int) []string {
		return []string{python, script, "127.0.0.1", strconv.Itoa(port)}
	}, nil)
	if err != nil {
		return nil, err
	}
	endpoint := "http://127.0.0.1:" + strconv.Itoa(srv.port)
	return &Store{
		Scheme:   "s3",
		Endpoint: endpoint,
		// moto accepts any credentials, but the SDK signs with some.
		env: []string{"AWS_ACCESS_KEY_ID=quiver-test", "AWS_SECRET_ACCESS_KEY=quiver-test",
			"AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true"},
		// moto answers ranged and multipart GETs without checksums, which
		// the SDK logs on every read unless it validates only on request.
		query: url.Values{"region": {"us-east-1"}, "endpoint": {endpoint}, "use_path_style": {"true"},
			"response_checksum_validation": {"when_required"}},
		create: func(ctx context.Context, bucket string) error {
			// moto creates a bucket on an unsigned PUT.
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, endpoint+"/"+bucket, nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("PUT bucket: %s", resp.Status)
			}
			return nil
		},
		stop: srv.stop,
	}, nil
}

package emulator

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quiver-ingest/quiver/internal/reftool"
)

// S3 returns the moto server of this test binary, starting it on first
// use from the project's .venv.
func S3(t testing.TB) *Store {
	t.Helper()
	return get(t, "s3", startMoto)
}

func startMoto() (*Store, error) {
	// moto accepts any credentials, but the SDK signs with some.
	return runMoto(nil, "quiver-test", "quiver-test")
}

// AuthBucket is the one bucket of S3WithAuth's store.
const AuthBucket = "quiver-auth"

// S3WithAuth starts a moto server of the test's own, stopped when the test
// ends, that checks credentials as S3 does (moto's IAM authentication):
// a request signed with another key id, or with the key id and another
// secret, is refused with 403. The store's Env holds the one key it
// accepts; its only bucket is AuthBucket (Store.Bucket fails).
func S3WithAuth(t testing.TB) *Store {
	t.Helper()
	s, err := runMoto([]string{"--auth", AuthBucket}, "", "")
	started(t, "s3 emulator with authentication", err)
	t.Cleanup(s.stop)
	return s
}

// runMoto starts moto_serialized.py with the extra arguments args. The
// store signs with keyID and secret, or with the key the script prints
// when they are empty (--auth).
func runMoto(args []string, keyID, secret string) (*Store, error) {
	root, err := reftool.RepoRoot()
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
		return append([]string{python, script, "127.0.0.1", strconv.Itoa(port)}, args...)
	}, nil)
	if err != nil {
		return nil, err
	}
	if keyID == "" {
		// Printed before the server started to answer, but the copy of
		// its output may lag behind on a loaded machine: poll for it.
		deadline := time.Now().Add(startTimeout)
		for {
			if keyID, secret = motoCredentials(srv.out.String()); keyID != "" || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if keyID == "" {
			srv.stop()
			return nil, fmt.Errorf("moto printed no credentials:\n%s", srv.out)
		}
	}
	endpoint := "http://127.0.0.1:" + strconv.Itoa(srv.port)
	return &Store{
		Scheme:   "s3",
		Endpoint: endpoint,
		env: []string{"AWS_ACCESS_KEY_ID=" + keyID, "AWS_SECRET_ACCESS_KEY=" + secret,
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

// motoCredentials finds the "credentials KEY SECRET" line
// moto_serialized.py prints, "" until it is there whole.
func motoCredentials(out string) (keyID, secret string) {
	_, rest, found := strings.Cut(out, "credentials ")
	line, _, whole := strings.Cut(rest, "\n")
	if !found || !whole {
		return "", ""
	}
	keyID, secret, _ = strings.Cut(line, " ")
	if secret == "" {
		return "", ""
	}
	return keyID, secret
}

package realkafka

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Version is the Apache Kafka release the tests run.
const Version = "4.1.1"

// mavenCentral serves the jars.
const mavenCentral = "https://repo1.maven.org/maven2"

//go:embed jars.txt
var jarList string

// jar is one pinned artifact of jars.txt.
type jar struct {
	group, artifact, version, sha256 string
}

func (j jar) file() string { return j.artifact + "-" + j.version + ".jar" }

func (j jar) url() string {
	return fmt.Sprintf("%s/%s/%s/%s/%s", mavenCentral, strings.ReplaceAll(j.group, ".", "/"), j.artifact, j.version, j.file())
}

func jars() ([]jar, error) {
	var out []jar
	sc := bufio.NewScanner(strings.NewReader(jarList))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		coords := strings.Split(f[0], ":")
		if len(f) != 2 || len(coords) != 3 || len(f[1]) != 64 {
			return nil, fmt.Errorf("realkafka: jars.txt: bad line %q", line)
		}
		out = append(out, jar{coords[0], coords[1], coords[2], f[1]})
	}
	return out, nil
}

// CacheDir is where the jars are kept: $QUIVER_KAFKA_CACHE, or
// .cache/kafka/<Version> at the root of the repository (git-ignored).
func CacheDir() (string, error) {
	if d := os.Getenv("QUIVER_KAFKA_CACHE"); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".cache", "kafka", Version), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("realkafka: no go.mod above the working directory: set QUIVER_KAFKA_CACHE")
		}
		dir = parent
	}
}

// Fetch downloads the jars of jars.txt missing from dir/jars, each checked
// against its pinned SHA-256, and returns the folder. Later calls find
// them and work offline.
func Fetch(dir string) (string, error) {
	js, err := jars()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "jars")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	cl := &http.Client{Timeout: 5 * time.Minute}
	for _, j := range js {
		path := filepath.Join(out, j.file())
		if _, err := os.Stat(path); err == nil {
			continue
		}
		if err := download(cl, j, path); err != nil {
			return "", err
		}
	}
	return out, nil
}

// download fetches j to path through a temporary file, so a cut download
// never looks complete.
func download(cl *http.Client, j jar, path string) error {
	resp, err := cl.Get(j.url())
	if err != nil {
		return fmt.Errorf("realkafka: fetch %s: %w", j.url(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("realkafka: fetch %s: HTTP %s", j.url(), resp.Status)
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(resp.Body, 64<<20)); err != nil {
		return fmt.Errorf("realkafka: fetch %s: %w", j.url(), err)
	}
	sum := sha256.Sum256(buf.Bytes())
	if got := hex.EncodeToString(sum[:]); got != j.sha256 {
		return fmt.Errorf("realkafka: %s has SHA-256 %s, jars.txt pins %s", j.url(), got, j.sha256)
	}
	tmp := path + ".part"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/quiver-ingest/quiver/server/config"
)

// TestKubernetesConfig: the config in deploy/kubernetes/configmap.yaml is
// a valid Quiver config (the manifests themselves are validated by
// kubeconform in deploy/kubernetes).
func TestKubernetesConfig(t *testing.T) {
	raw, err := os.ReadFile("../deploy/kubernetes/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(raw, &cm); err != nil {
		t.Fatal(err)
	}
	// The Secret's files, where the pod mounts them.
	t.Setenv("QUIVER_TOKEN", "a-token")
	key := filepath.Join(t.TempDir(), "descriptor.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("ab", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(cm.Data["quiver.yaml"], "/etc/quiver/key/descriptor.key", key, 1)
	cfg, err := config.Parse([]byte(text), "/etc/quiver", Sinks())
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Endpoints) != 2 || cfg.DataDir != "/var/lib/quiver" {
		t.Fatalf("endpoints %d, data_dir %q", len(cfg.Endpoints), cfg.DataDir)
	}
}

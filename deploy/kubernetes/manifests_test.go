// Package kubernetes holds Quiver's Kubernetes manifests (the YAML files
// of this folder) and their tests: every manifest is valid for the
// Kubernetes API, checked by kubeconform against the API's JSON schemas
// cached in schemas/ (written by schemas/generate.py; no network), and
// the manifests are wired as docs/operations.md describes them. The
// config they carry is tested by the server package (TestKubernetesConfig).
package kubernetes

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/yannh/kubeconform/pkg/validator"
	"go.yaml.in/yaml/v3"
)

// k8sVersion is the Kubernetes version of the cached schemas
// (schemas/generate.py).
const k8sVersion = "1.37.0"

// newValidator returns kubeconform, strict (no unknown field), reading
// the schemas of this folder only.
func newValidator(t *testing.T) validator.Validator {
	t.Helper()
	dir, err := filepath.Abs("schemas")
	if err != nil {
		t.Fatal(err)
	}
	v, err := validator.New([]string{dir}, validator.Opts{Strict: true, KubernetesVersion: k8sVersion})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// validate returns kubeconform's verdict on each resource of the YAML in
// raw: "" when valid, the reason otherwise.
func validate(t *testing.T, v validator.Validator, name string, raw []byte) []string {
	t.Helper()
	var out []string
	for _, r := range v.Validate(name, io.NopCloser(bytes.NewReader(raw))) {
		switch {
		case r.Status == validator.Valid:
			out = append(out, "")
		case r.Err != nil:
			out = append(out, fmt.Sprintf("%v %v", r.Err, r.ValidationErrors))
		default:
			out = append(out, fmt.Sprintf("status %d", r.Status))
		}
	}
	return out
}

func manifestFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("manifests: %v, %v", files, err)
	}
	return files
}

// TestManifestsValidate: every resource of every manifest is valid for
// the Kubernetes API, and the manifests hold the resources
// docs/operations.md lists.
func TestManifestsValidate(t *testing.T) {
	v := newValidator(t)
	for _, f := range manifestFiles(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		verdicts := validate(t, v, f, raw)
		if len(verdicts) == 0 {
			t.Errorf("%s: no resource found", f)
		}
		for i, why := range verdicts {
			if why != "" {
				t.Errorf("%s, resource %d: %s", f, i, why)
			}
		}
	}
	got := map[string]bool{}
	for key := range manifests(t) {
		got[key] = true
	}
	for _, want := range []string{"ConfigMap/quiver", "Secret/quiver", "StatefulSet/quiver", "Service/quiver",
		"Service/quiver-headless", "PodDisruptionBudget/quiver"} {
		if !got[want] {
			t.Errorf("no %s among the manifests (%v)", want, got)
		}
	}
}

// TestValidatorRejects: the schemas are strict and really consulted: a
// misspelt field, a value of the wrong type and a kind without a cached
// schema are each refused.
func TestValidatorRejects(t *testing.T) {
	v := newValidator(t)
	raw, err := os.ReadFile("statefulset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"unknown field": strings.Replace(string(raw), "httpGet: {path: /readyz,", "httpGet: {pathh: /readyz,", 1),
		"wrong type":    strings.Replace(string(raw), "replicas: 3", "replicas: three", 1),
		"no schema":     strings.Replace(string(raw), "kind: StatefulSet", "kind: ReplicaSet", 1),
	} {
		if bad == string(raw) {
			t.Fatalf("%s: the edit did not apply to statefulset.yaml", name)
		}
		if verdicts := validate(t, v, name, []byte(bad)); len(verdicts) != 1 || verdicts[0] == "" {
			t.Errorf("%s: kubeconform's verdicts %q, want one refusal", name, verdicts)
		}
	}
}

// manifests returns every resource of the manifests by kind/name.
func manifests(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, f := range manifestFiles(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var doc map[string]any
			if err := dec.Decode(&doc); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out[fmt.Sprintf("%v/%v", doc["kind"], get(t, doc, "metadata", "name"))] = doc
		}
	}
	return out
}

// get walks doc along keys (map keys, or list indexes as ints) and fails
// the test when a step is missing.
func get(t *testing.T, doc any, keys ...any) any {
	t.Helper()
	cur := doc
	for i, k := range keys {
		var ok bool
		switch k := k.(type) {
		case string:
			var m map[string]any
			if m, ok = cur.(map[string]any); ok {
				cur, ok = m[k]
			}
		case int:
			var l []any
			if l, ok = cur.([]any); ok && k < len(l) {
				cur = l[k]
			} else {
				ok = false
			}
		}
		if !ok {
			t.Fatalf("manifest has no %v", keys[:i+1])
		}
	}
	return cur
}

// mebibytes parses a Kubernetes memory quantity in Mi or Gi.
func mebibytes(t *testing.T, q any) int64 {
	t.Helper()
	s := fmt.Sprint(q)
	for suffix, mult := range map[string]int64{"Mi": 1, "Gi": 1024} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			if v, err := strconv.ParseInt(n, 10, 64); err == nil {
				return v * mult
			}
		}
	}
	t.Fatalf("memory quantity %q: want <n>Mi or <n>Gi", s)
	return 0
}

// TestManifestsWiring: the pieces fit together as docs/operations.md
// says: probes on /readyz and /healthz, a grace period covering the 30 s
// drain, memory from the budget, the shared key mounted where the config
// reads it, data_dir on a volume of each replica, the services and the
// disruption budget.
func TestManifestsWiring(t *testing.T) {
	docs := manifests(t)
	set := docs["StatefulSet/quiver"]
	pod := get(t, set, "spec", "template", "spec")
	c := get(t, pod, "containers", 0)
	var config struct {
		DataDir string `yaml:"data_dir"`
		Txn     struct {
			KeyFile string `yaml:"descriptor_key_file"`
		} `yaml:"txn"`
		Limits struct {
			MemoryBytes int64 `yaml:"memory_bytes"`
		} `yaml:"limits"`
	}
	if err := yaml.Unmarshal([]byte(get(t, docs["ConfigMap/quiver"], "data", "quiver.yaml").(string)), &config); err != nil {
		t.Fatal(err)
	}

	if p := get(t, c, "readinessProbe", "httpGet", "path"); p != "/readyz" {
		t.Errorf("readiness probe on %v, want /readyz", p)
	}
	if p := get(t, c, "livenessProbe", "httpGet", "path"); p != "/healthz" {
		t.Errorf("liveness probe on %v, want /healthz", p)
	}
	if g := get(t, pod, "terminationGracePeriodSeconds").(int); g <= 30 {
		t.Errorf("terminationGracePeriodSeconds %d: not longer than the server's 30 s drain", g)
	}

	// The container holds what the budget lets the process reach.
	if config.Limits.MemoryBytes == 0 {
		t.Fatal("the config sets no limits.memory_bytes")
	}
	need := 2*config.Limits.MemoryBytes>>20 + 256
	for _, kind := range []string{"requests", "limits"} {
		if got := mebibytes(t, get(t, c, "resources", kind, "memory")); got != need {
			t.Errorf("resources.%s.memory %d Mi, want 2 x memory_bytes + 256 Mi = %d Mi", kind, got, need)
		}
	}

	mounts := map[string]string{}
	for _, m := range get(t, c, "volumeMounts").([]any) {
		mounts[get(t, m, "name").(string)] = get(t, m, "mountPath").(string)
	}
	keyMount, mounted := mounts["key"]
	var keySecret any
	for _, v := range get(t, pod, "volumes").([]any) {
		if get(t, v, "name") == "key" {
			keySecret = get(t, v, "secret", "secretName")
		}
	}
	if !mounted || keyMount == "" || !strings.HasPrefix(config.Txn.KeyFile, keyMount+"/") || keySecret != "quiver" {
		t.Errorf("descriptor_key_file %q is not in the mount %q (mounted %v) of the volume key of Secret quiver (%v)", config.Txn.KeyFile, keyMount, mounted, keySecret)
	}
	if mounts["data"] != config.DataDir || get(t, set, "spec", "volumeClaimTemplates", 0, "metadata", "name") != "data" {
		t.Errorf("data_dir %q is not the replica's own volume (mounted at %q)", config.DataDir, mounts["data"])
	}

	if get(t, docs["Service/quiver-headless"], "spec", "clusterIP") != "None" {
		t.Error("quiver-headless is not headless")
	}
	if get(t, set, "spec", "serviceName") != "quiver-headless" {
		t.Error("the StatefulSet's governing Service is not quiver-headless")
	}
	if get(t, docs["PodDisruptionBudget/quiver"], "spec", "maxUnavailable") != 1 {
		t.Error("the PodDisruptionBudget lets more than one replica go at a time")
	}
}

package config

import (
	"cmp"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/quiver-ingest/quiver/writers"
)

// file is the shape of the YAML document: Config plus the endpoints in raw
// form, whose sink sections can only be decoded once the sink is known.
type file struct {
	Config    `yaml:",inline"`
	Endpoints []rawEndpoint `yaml:"endpoints"`
}

// rawEndpoint is an endpoint before its sink section is decoded.
type rawEndpoint struct {
	Name string `yaml:"name"`
	Sink string `yaml:"sink"`
	// Sections collects every other key: the sink settings sections.
	Sections map[string]yaml.Node `yaml:",inline"`
}

// Load reads the config file at path, decodes it over [Default] and
// validates it; sinks are looked up in reg. Relative paths resolve against
// the file's folder. Secrets are read from the environment (token_env).
//
// Every problem found is returned in one *Error (wrapping
// writers.ErrInvalid), not just the first.
func Load(path string, reg *writers.Registry) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Problems: []Problem{{Msg: "cannot read it: " + err.Error()}}}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &Error{File: path, Problems: []Problem{{Msg: err.Error()}}}
	}
	cfg, err := Parse(data, filepath.Dir(abs), reg)
	if e, ok := errors.AsType[*Error](err); ok {
		e.File = path
	}
	return cfg, err
}

// Parse is Load for a config held in memory; dir stands for the config
// file's folder.
func Parse(data []byte, dir string, reg *writers.Registry) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, &Error{Problems: []Problem{syntaxProblem(err)}}
	}
	d := newDecoder()
	f := file{Config: *Default()}
	d.decode(&root, reflect.ValueOf(&f).Elem(), "")
	cfg := &f.Config
	cfg.Dir = dir
	v := &validator{decoder: d}
	cfg.Endpoints = v.endpoints(f.Endpoints, reg)
	v.config(cfg)
	if len(d.problems) > 0 {
		// Report in file order; problems without a line (missing keys) last.
		slices.SortStableFunc(d.problems, func(a, b Problem) int {
			return cmp.Compare(lineOrder(a.Line), lineOrder(b.Line))
		})
		return nil, &Error{Problems: d.problems}
	}
	return cfg, nil
}

func lineOrder(line int) int {
	if line == 0 {
		return int(^uint(0) >> 1)
	}
	return line
}

// yaml.v3 reports syntax errors as "yaml: line N: message".
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func syntaxProblem(err error) Problem {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return Problem{Line: line, Msg: "invalid YAML: " + m[2]}
	}
	return Problem{Msg: "invalid YAML: " + err.Error()}
}

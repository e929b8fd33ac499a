package config

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/quiver-ingest/quiver/writers"
)

// endpointName is the rule of docs/flight.md, "Endpoint names".
var endpointName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// endpoints validates the raw endpoints and decodes each one's sink section
// into the sink's config.
func (v *validator) endpoints(raws []rawEndpoint, reg *writers.Registry) []Endpoint {
	if len(raws) == 0 {
		v.fail("endpoints", "at least one endpoint is required (for example: {name: devnull, sink: discard})")
	}
	names := make(map[string]int)
	out := make([]Endpoint, 0, len(raws))
	for i, raw := range raws {
		p := fmt.Sprintf("endpoints[%d]", i)
		switch first, dup := names[raw.Name]; {
		case raw.Name == "":
			v.fail(p+".name", "required")
		case !endpointName.MatchString(raw.Name):
			v.fail(p+".name", "%q is not a valid endpoint name: use letters, digits, '_', '.' and '-', starting with a letter or digit, at most 128 characters", raw.Name)
		case dup:
			v.fail(p+".name", "%q is already the name of endpoints[%d]", raw.Name, first)
		default:
			names[raw.Name] = i
		}
		maint := v.maintenance(p, raw, reg)
		stream := v.stream(p, raw, reg)
		out = append(out, Endpoint{Name: raw.Name, Sink: raw.Sink, Settings: v.sinkSettings(p, raw, reg), Maintenance: maint, Stream: stream})
	}
	return out
}

// Endpoint sections beside the sink's own: table maintenance, and the
// group commits of continuous streams.
const (
	maintenanceKey = "maintenance"
	streamKey      = "stream"
)

// maintenance decodes and validates an endpoint's maintenance section
// (its defaults when there is none). Only sinks that maintain their
// tables accept one.
func (v *validator) maintenance(p string, raw rawEndpoint, reg *writers.Registry) writers.Maintenance {
	m := writers.NewMaintenance()
	v.section(p, raw, reg, maintenanceKey, &m, func(s writers.Sink) string {
		if !s.Maintains.Any() {
			return "has no table maintenance"
		}
		return ""
	})
	return m
}

// stream decodes and validates an endpoint's stream section (its defaults
// when there is none). Only sinks that take continuous streams accept
// one.
func (v *validator) stream(p string, raw rawEndpoint, reg *writers.Registry) writers.GroupCommit {
	c := writers.NewGroupCommit()
	v.section(p, raw, reg, streamKey, &c, func(s writers.Sink) string {
		if !s.Streams {
			return "takes no continuous streams"
		}
		return ""
	})
	return c
}

// section decodes the endpoint section key, when raw has one, into out
// (holding its defaults), validates it, and takes it out of raw.Sections.
// refuses says why the endpoint's sink takes no such section ("" when it
// does).
func (v *validator) section(p string, raw rawEndpoint, reg *writers.Registry, key string, out interface{ Validate() error }, refuses func(writers.Sink) string) {
	node, ok := raw.Sections[key]
	if !ok {
		return
	}
	delete(raw.Sections, key)
	path := p + "." + key
	if sink, err := reg.Lookup(raw.Sink); err == nil {
		if why := refuses(sink); why != "" {
			v.fail(path, "sink %q %s: remove this section", raw.Sink, why)
			return
		}
	}
	before := len(v.problems)
	v.decode(&node, reflect.ValueOf(out), path)
	if len(v.problems) > before {
		return
	}
	if err := out.Validate(); err != nil {
		for _, msg := range strings.Split(err.Error(), "\n") {
			key, rest, _ := strings.Cut(msg, ": ")
			v.fail(path+"."+key, "%s", rest)
		}
	}
}

// sinkSettings checks an endpoint's sink and sections and returns its
// decoded, validated settings (nil when the sink is unknown).
func (v *validator) sinkSettings(p string, raw rawEndpoint, reg *writers.Registry) writers.SinkConfig {
	available := strings.Join(reg.Names(), ", ")
	var sink writers.Sink
	var known bool
	if raw.Sink == "" {
		v.fail(p+".sink", "required (available: %s)", available)
	} else if s, err := reg.Lookup(raw.Sink); err != nil {
		v.fail(p+".sink", "sink %q is not available in this build (available: %s)", raw.Sink, available)
	} else {
		sink, known = s, true
	}

	sections := reg.Sections()
	for _, key := range slices.Sorted(maps.Keys(raw.Sections)) {
		switch {
		case known && key == sink.Section:
		case slices.Contains(sections, key):
			v.fail(p+"."+key, "this section configures another sink, but the endpoint's sink is %q: remove it or change sink", raw.Sink)
		case !known && key == raw.Sink:
			// The sink error above already covers its section.
		default:
			v.problem(v.line(p+"."+key), p, "%s", unknownKey(key, append([]string{"name", "sink", maintenanceKey, streamKey}, sections...)))
		}
	}
	if !known {
		return nil
	}

	cfg := sink.NewConfig()
	before := len(v.problems)
	if node, ok := raw.Sections[sink.Section]; ok && sink.Section != "" {
		rv := reflect.ValueOf(cfg)
		if rv.Kind() != reflect.Pointer {
			panic(fmt.Sprintf("config: sink %q: NewConfig must return a pointer, got %T", sink.Name, cfg))
		}
		v.decode(&node, rv, p+"."+sink.Section)
	}
	if len(v.problems) > before {
		return nil // a section that did not decode is not worth validating
	}
	section := p
	if sink.Section != "" {
		section = p + "." + sink.Section
	}
	err := cfg.Validate()
	if err == nil {
		return cfg
	}
	// One problem per line: errors.Join puts each joined error on its own.
	for _, msg := range strings.Split(err.Error(), "\n") {
		// Sinks name the key relative to their section: "mode: must be ...".
		path := section
		if key, rest, ok := strings.Cut(msg, ": "); ok && !strings.ContainsAny(key, " \"'") {
			path, msg = section+"."+key, rest
		}
		v.fail(path, "%s", msg)
	}
	return cfg
}

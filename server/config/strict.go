package config

import (
	"encoding"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decoder decodes YAML nodes into Go values strictly: every mapping key must
// name a field (by its yaml tag, or its lowercased name as yaml.v3 does), so
// a misspelled key is reported instead of silently ignored. yaml.v3's own
// Node.Decode is not strict, and Decoder.KnownFields applies to a whole
// document at once, which does not fit sink sections decoded one by one.
//
// Supported: structs (with ",inline" structs and one ",inline" map that
// collects the keys no field claims), pointers, slices, maps with string
// keys, yaml.Node (the raw node is kept) and every scalar yaml.v3 decodes,
// including time.Duration ("15m") and types implementing yaml.Unmarshaler
// or encoding.TextUnmarshaler. Aliases and merge keys ("<<: *base") work.
// A null value leaves the target unchanged, so defaults survive "key:".
//
// The decoder does not stop at the first problem: it collects them all and
// records the line of every path it saw, for later validation messages.
type decoder struct {
	problems []Problem
	lines    map[string]int
}

func newDecoder() *decoder { return &decoder{lines: make(map[string]int)} }

func (d *decoder) problem(line int, path, format string, args ...any) {
	d.problems = append(d.problems, Problem{Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

var (
	nodeType        = reflect.TypeFor[yaml.Node]()
	durationType    = reflect.TypeFor[time.Duration]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decode decodes n into v, which must be settable. path is the YAML path of
// n ("" for the document root), used in problems.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	n = resolve(n)
	if n == nil {
		return
	}
	if path != "" {
		if _, seen := d.lines[path]; !seen {
			d.lines[path] = n.Line
		}
	}
	t := v.Type()
	switch {
	case t == nodeType:
		v.Set(reflect.ValueOf(*n))
		return
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null":
		return
	case t.Kind() == reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.decode(n, v.Elem(), path)
		return
	case reflect.PointerTo(t).Implements(unmarshalerType), reflect.PointerTo(t).Implements(textType):
		d.scalar(n, v, path)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		d.structure(n, v, path)
	case reflect.Slice:
		d.sequence(n, v, path)
	case reflect.Map:
		d.mapping(n, v, path)
	default:
		d.scalar(n, v, path)
	}
}

// resolve follows document wrappers and aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil {
		switch n.Kind {
		case yaml.DocumentNode:
			if len(n.Content) == 0 {
				return nil
			}
			n = n.Content[0]
		case yaml.AliasNode:
			n = n.Alias
		default:
			return n
		}
	}
	return nil
}

// field is one settable key of a struct: the index path to the Go field.
type field struct {
	index []int
}

// fields lists the keys of struct type t, descending into ",inline"
// structs; catchAll is the index path of the ",inline" map, if any.
func fields(t reflect.Type) (keys map[string]field, catchAll []int) {
	keys = make(map[string]field)
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("yaml")
			name, opts, _ := strings.Cut(tag, ",")
			// An embedded struct of an unexported type still has settable
			// exported fields, so only non-inline fields need exporting.
			if name == "-" || (!f.IsExported() && opts != "inline") {
				continue
			}
			idx := append(slices.Clone(prefix), i)
			if opts == "inline" {
				switch f.Type.Kind() {
				case reflect.Struct:
					walk(f.Type, idx)
				case reflect.Map:
					catchAll = idx
				default:
					panic(fmt.Sprintf("config: field %s: inline needs a struct or map, not %s", f.Name, f.Type))
				}
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			if _, dup := keys[name]; !dup { // the shallower field wins, as in Go
				keys[name] = field{index: idx}
			}
		}
	}
	walk(t, nil)
	return keys, catchAll
}

// pair is one key and value of a mapping, merge keys already expanded.
type pair struct {
	key   *yaml.Node
	value *yaml.Node
}

// pairs returns the entries of mapping n with "<<" merge keys expanded:
// merged entries come first, so the mapping's own keys override them.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var merged, own []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == "!!merge" {
			src := resolve(val)
			var maps []*yaml.Node
			if src.Kind == yaml.SequenceNode {
				for _, m := range src.Content {
					maps = append(maps, resolve(m))
				}
			} else {
				maps = append(maps, src)
			}
			for _, m := range maps {
				if m.Kind != yaml.MappingNode {
					d.problem(k.Line, path, "merge key \"<<\" needs a mapping or a list of mappings")
					continue
				}
				merged = append(merged, d.pairs(m, path)...)
			}
			continue
		}
		own = append(own, pair{k, val})
	}
	// Merged entries may repeat keys; the last one wins, as in yaml.v3.
	out := make([]pair, 0, len(merged)+len(own))
	seen := make(map[string]int)
	for _, p := range append(merged, own...) {
		if i, ok := seen[p.key.Value]; ok {
			out[i] = p
			continue
		}
		seen[p.key.Value] = len(out)
		out = append(out, p)
	}
	return out
}

func (d *decoder) expectMapping(n *yaml.Node, path string) bool {
	if n.Kind == yaml.MappingNode {
		return true
	}
	d.problem(n.Line, path, "expected a mapping of keys, got %s", describe(n))
	return false
}

func (d *decoder) structure(n *yaml.Node, v reflect.Value, path string) {
	if !d.expectMapping(n, path) {
		return
	}
	keys, catchAll := fields(v.Type())
	seen := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if first, dup := seen[k.Value]; dup && k.Value != "<<" {
			d.problem(k.Line, join(path, k.Value), "duplicate key %q (first at line %d)", k.Value, first)
		}
		seen[k.Value] = k.Line
	}
	for _, p := range d.pairs(n, path) {
		name := p.key.Value
		sub := join(path, name)
		if f, ok := keys[name]; ok {
			d.lines[sub] = p.key.Line
			d.decode(p.value, v.FieldByIndex(f.index), sub)
			continue
		}
		if catchAll != nil {
			d.lines[sub] = p.key.Line
			m := v.FieldByIndex(catchAll)
			if m.IsNil() {
				m.Set(reflect.MakeMap(m.Type()))
			}
			elem := reflect.New(m.Type().Elem()).Elem()
			d.decode(p.value, elem, sub)
			m.SetMapIndex(reflect.ValueOf(name).Convert(m.Type().Key()), elem)
			continue
		}
		d.problem(p.key.Line, path, "%s", unknownKey(name, slices.Sorted(maps.Keys(keys))))
	}
}

func (d *decoder) sequence(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.problem(n.Line, path, "expected a list, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
	}
	v.Set(s)
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if !d.expectMapping(n, path) {
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		panic(fmt.Sprintf("config: map type %s: only string keys are supported", v.Type()))
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for _, p := range d.pairs(n, path) {
		sub := join(path, p.key.Value)
		d.lines[sub] = p.key.Line
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(p.value, elem, sub)
		v.SetMapIndex(reflect.ValueOf(p.key.Value).Convert(v.Type().Key()), elem)
	}
}

// scalar decodes a leaf with yaml.v3 and rewords its error: yaml.v3 talks
// about Go types ("cannot unmarshal !!str into int"), users need the key
// and what it wants.
func (d *decoder) scalar(n *yaml.Node, v reflect.Value, path string) {
	custom := reflect.PointerTo(v.Type()).Implements(unmarshalerType)
	if n.Kind != yaml.ScalarNode && !custom {
		d.problem(n.Line, path, "expected %s, got %s", want(v.Type()), describe(n))
		return
	}
	target := reflect.New(v.Type())
	if err := n.Decode(target.Interface()); err != nil {
		if custom || n.Kind == yaml.ScalarNode && reflect.PointerTo(v.Type()).Implements(textType) {
			d.problem(n.Line, path, "%v", err)
		} else {
			d.problem(n.Line, path, "expected %s, got %s", want(v.Type()), describe(n))
		}
		return
	}
	v.Set(target.Elem())
}

// want names what a Go type accepts, in YAML terms.
func want(t reflect.Type) string {
	if t == durationType {
		return "a duration like 30s or 15m"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return "a " + t.String()
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

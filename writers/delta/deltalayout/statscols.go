package deltalayout

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// defaultIndexedCols is delta.dataSkippingNumIndexedCols' default.
const defaultIndexedCols = 32

// StatsColumns is the set of leaf columns whose statistics a table's data
// files carry (minValues, maxValues, nullCount); numRecords is always
// written.
type StatsColumns struct {
	paths map[string]bool // leaf paths joined by pathSep
}

const pathSep = "\x00"

// Has reports whether the leaf column at path (struct field names from the
// top level down, as in the table schema) gets statistics.
func (c *StatsColumns) Has(path []string) bool {
	return c.paths[strings.Join(path, pathSep)]
}

// StatsColumnsOf returns the columns whose statistics the data files of a
// table with this schema, partition columns and configuration carry, as
// Spark decides them: delta.dataSkippingStatsColumns when set (a
// comma-separated list of column names, nested fields by dotted path,
// backquoted names for names holding dots, commas or backquotes doubled;
// a struct means all its leaves; names match case-insensitively, unknown
// ones are ignored), else the first delta.dataSkippingNumIndexedCols leaf
// columns (default 32, -1 for all) in schema order, where each leaf of a
// struct counts, and an array or map counts as one. Partition columns
// never count: they are not in data files. A malformed property is an
// error wrapping ErrCorrupt.
func StatsColumnsOf(schema *deltalog.Schema, partitionColumns []string, conf map[string]string) (*StatsColumns, error) {
	data := make([]deltalog.StructField, 0, len(schema.Fields))
	for _, f := range schema.Fields {
		if !containsFold(partitionColumns, f.Name) {
			data = append(data, f)
		}
	}
	c := &StatsColumns{paths: map[string]bool{}}
	if list := strings.TrimSpace(conf["delta.dataSkippingStatsColumns"]); list != "" {
		names, err := parseColumnList(list)
		if err != nil {
			return nil, fmt.Errorf("delta: delta.dataSkippingStatsColumns %q: %w: %w", list, err, deltalog.ErrCorrupt)
		}
		for _, name := range names {
			if f, path, ok := resolveField(data, name); ok {
				c.addLeaves(path, f.Type, -1)
			}
		}
		return c, nil
	}
	n := defaultIndexedCols
	if v, ok := conf["delta.dataSkippingNumIndexedCols"]; ok {
		var err error
		if n, err = strconv.Atoi(strings.TrimSpace(v)); err != nil || n < -1 {
			return nil, fmt.Errorf("delta: delta.dataSkippingNumIndexedCols %q: want an integer ≥ -1: %w", v, deltalog.ErrCorrupt)
		}
	}
	for _, f := range data {
		if n == 0 {
			break
		}
		added := c.addLeaves([]string{f.Name}, f.Type, n)
		if n > 0 {
			n -= added
		}
	}
	return c, nil
}

// addLeaves adds the leaves of the column at path of type t, at most limit
// of them (< 0: all), and returns how many it added.
func (c *StatsColumns) addLeaves(path []string, t deltalog.DataType, limit int) int {
	if t.Name != "struct" {
		if limit == 0 {
			return 0
		}
		c.paths[strings.Join(path, pathSep)] = true
		return 1
	}
	added := 0
	for _, f := range t.Fields {
		if limit >= 0 && added == limit {
			break
		}
		added += c.addLeaves(append(path[:len(path):len(path)], f.Name), f.Type, limit-added)
	}
	return added
}

// resolveField finds the field at the multi-part name (case-insensitively
// at every level, through structs) and returns it with its path as the
// schema spells it.
func resolveField(fields []deltalog.StructField, name []string) (deltalog.StructField, []string, bool) {
	var path []string
	for i, part := range name {
		j := -1
		for k, f := range fields {
			if strings.EqualFold(f.Name, part) {
				j = k
				break
			}
		}
		if j < 0 {
			return deltalog.StructField{}, nil, false
		}
		f := fields[j]
		path = append(path, f.Name)
		if i == len(name)-1 {
			return f, path, true
		}
		fields = f.Type.Fields
	}
	return deltalog.StructField{}, nil, false
}

// parseColumnList splits Spark's column list syntax: names separated by
// commas, parts by dots, spaces around them ignored; a part in backquotes
// is taken literally, two backquotes standing for one.
func parseColumnList(s string) ([][]string, error) {
	var (
		out    [][]string
		name   []string
		part   strings.Builder
		quoted bool // the current part was backquoted
	)
	end := func() error {
		p := part.String()
		if !quoted {
			p = strings.TrimSpace(p)
		}
		if p == "" && !quoted {
			return fmt.Errorf("an empty column name")
		}
		name = append(name, p)
		part.Reset()
		quoted = false
		return nil
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '`':
			if strings.TrimSpace(part.String()) != "" {
				return nil, fmt.Errorf("a backquote inside a name")
			}
			part.Reset()
			closed := false
			for i++; i < len(s); i++ {
				if s[i] != '`' {
					part.WriteByte(s[i])
				} else if i+1 < len(s) && s[i+1] == '`' {
					part.WriteByte('`')
					i++
				} else {
					closed = true
					break
				}
			}
			if !closed {
				return nil, fmt.Errorf("an unclosed backquote")
			}
			quoted = true
			// Only spaces may follow, up to the next '.' or ','.
			for i+1 < len(s) && s[i+1] == ' ' {
				i++
			}
			if i+1 < len(s) && s[i+1] != '.' && s[i+1] != ',' {
				return nil, fmt.Errorf("%q after a backquoted name", s[i+1])
			}
		case c == '.':
			if err := end(); err != nil {
				return nil, err
			}
		case c == ',':
			if err := end(); err != nil {
				return nil, err
			}
			out, name = append(out, name), nil
		default:
			if quoted {
				return nil, fmt.Errorf("%q after a backquoted name", c)
			}
			part.WriteByte(c)
		}
	}
	if err := end(); err != nil {
		return nil, err
	}
	return append(out, name), nil
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

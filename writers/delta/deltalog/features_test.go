package deltalog

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// A commit whose metaData brings a timestamp_ntz column also upgrades the
// protocol (delta-kernel-rs refuses a table with such a column and without
// the timestampNtz feature), keeping the features the table had, legacy
// ones included.
func TestCommitUpgradesProtocolForSchema(t *testing.T) {
	ntz := arrow.Field{Name: "local", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true}
	withNTZ := arrow.NewSchema(append(testSchema.Fields(), ntz), nil)
	other := arrow.NewSchema(append(withNTZ.Fields(), arrow.Field{Name: "more", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), nil)
	cases := []struct {
		name    string
		created *arrow.Schema
		conf    map[string]string
		evolved *arrow.Schema
		want    Protocol
	}{
		{"legacy 1/2", testSchema, nil, withNTZ,
			Protocol{3, 7, []string{"timestampNtz"}, []string{"appendOnly", "invariants", "timestampNtz"}}},
		{"3/7 with deletion vectors", testSchema, map[string]string{"delta.enableDeletionVectors": "true"}, withNTZ,
			Protocol{3, 7, []string{"deletionVectors", "timestampNtz"}, []string{"deletionVectors", "timestampNtz"}}},
		{"feature already there", withNTZ, nil, other,
			Protocol{3, 7, []string{"timestampNtz"}, []string{"timestampNtz"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stores(t, func(t *testing.T, store Store) {
				s, err := Create(t.Context(), store, c.created, []string{"day"}, c.conf)
				if err != nil {
					t.Fatal(err)
				}
				evolved, err := FromArrow(c.evolved)
				if err != nil {
					t.Fatal(err)
				}
				m := s.Metadata
				m.SchemaString = evolved.String()
				actions := []Action{{MetaData: &m}, addAction("f", "d")}
				if _, err := Commit(t.Context(), store, s, actions, CommitOptions{}); err != nil {
					t.Fatal(err)
				}
				if actions[0].MetaData != &m || len(actions) != 2 {
					t.Fatal("Commit modified the caller's actions")
				}
				got, err := Load(t.Context(), store)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got.Protocol, c.want) {
					t.Fatalf("protocol %+v, want %+v", got.Protocol, c.want)
				}
				if err := CheckWritable(got); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
	// The first commit of a table planned against one schema and
	// publishing a wider one (rows that evolved it) creates it with the
	// protocol the wider one needs.
	stores(t, func(t *testing.T, store Store) {
		s, err := NewTableSnapshot(testSchema, []string{"day"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		evolved, _ := FromArrow(withNTZ)
		m := s.Metadata
		m.SchemaString = evolved.String()
		if _, err := Commit(t.Context(), store, s, []Action{{MetaData: &m}, addAction("f", "d")}, CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := Load(t.Context(), store)
		if err != nil {
			t.Fatal(err)
		}
		want := Protocol{3, 7, []string{"timestampNtz"}, []string{"timestampNtz"}}
		if !reflect.DeepEqual(got.Protocol, want) {
			t.Fatalf("created with protocol %+v, want %+v", got.Protocol, want)
		}
	})
}

// A table whose schema needs a feature its protocol lacks (written by a
// writer that forgot the upgrade) is refused, naming the feature.
func TestCheckWritableSchemaFeatures(t *testing.T) {
	s, err := NewTableSnapshot(testSchema, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckWritable(s); err != nil {
		t.Fatal(err)
	}
	schema, _ := FromArrow(arrow.NewSchema(append(testSchema.Fields(),
		arrow.Field{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "local", Type: &arrow.TimestampType{Unit: arrow.Second}, Nullable: true}), Nullable: true}), nil))
	s.Metadata.SchemaString = schema.String()
	for _, p := range []Protocol{
		{1, 2, nil, nil},
		{3, 7, nil, []string{"timestampNtz"}},
		{1, 7, nil, []string{"timestampNtz"}},
	} {
		s.Protocol = p
		err := CheckWritable(s)
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "timestampNtz") {
			t.Errorf("protocol %+v, timestamp_ntz column: %v, want ErrUnsupported naming timestampNtz", p, err)
		}
	}
}

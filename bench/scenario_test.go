package bench

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sizeOptions are the options of the test scenarios: --size.
type sizeOptions struct{ size string }

func (o *sizeOptions) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.size, "size", "3", "a scenario flag")
}

// wideOptions add --width.
type wideOptions struct {
	sizeOptions
	width int
}

func (o *wideOptions) Register(fs *flag.FlagSet) {
	o.sizeOptions.Register(fs)
	fs.IntVar(&o.width, "width", 1, "another scenario flag")
}

// TestMainScenarios checks that --scenario runs the named scenario with
// its own flags (two scenarios may share a flag name), that the first is
// the default, and that flags of another scenario are refused.
func TestMainScenarios(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantRan string // scenario and --size when it ran
		wantErr string
	}{
		{"default scenario", []string{"--size", "5"}, "small 5", ""},
		{"named, flag after", []string{"--scenario", "wide", "--size", "7"}, "wide 7", ""},
		{"named, flag before", []string{"--size", "7", "--scenario=wide", "--width", "2"}, "wide 7", ""},
		{"single dash", []string{"-scenario", "wide"}, "wide 3", ""},
		{"unknown scenario", []string{"--scenario", "nope"}, "", `"nope": give one of small, wide`},
		{"flag of another scenario", []string{"--width", "2"}, "", "flag provided but not defined: -width"},
		{"stray argument", []string{"extra"}, "", `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := ""
			small := NewScenario[sizeOptions]("small", "test scenario", func(_ context.Context, o sizeOptions, _, _ io.Writer) error {
				ran = "small " + o.size
				return nil
			})
			wide := NewScenario[wideOptions]("wide", "test scenario", func(_ context.Context, o wideOptions, _, _ io.Writer) error {
				ran = "wide " + o.size
				return nil
			})
			err := Main(t.Context(), tt.args, io.Discard, io.Discard, small, wide)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Main: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Main error %v, want one containing %q", err, tt.wantErr)
			}
			if ran != tt.wantRan {
				t.Errorf("ran %q, want %q", ran, tt.wantRan)
			}
		})
	}
}

func TestMainHelp(t *testing.T) {
	var out strings.Builder
	small := NewScenario[sizeOptions]("small", "the small one", func(context.Context, sizeOptions, io.Writer, io.Writer) error { return nil })
	if err := Main(t.Context(), []string{"-h"}, io.Discard, &out, small); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"--scenario small: the small one", "-size"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

// secretOptions add --token to --size.
type secretOptions struct {
	sizeOptions
	token string
}

func (o *secretOptions) Register(fs *flag.FlagSet) {
	o.sizeOptions.Register(fs)
	fs.StringVar(&o.token, "token", "", "a secret")
}

// TestMainRecord checks that --record writes the report, the command line
// (a secret flag's value masked) and the machine to one new file per run,
// and nothing for a failed run.
func TestMainRecord(t *testing.T) {
	dir := t.TempDir()
	ok := NewScenario[secretOptions]("tiny", "prints a table", func(_ context.Context, o secretOptions, stdout, _ io.Writer) error {
		_, err := io.WriteString(stdout, "| size |\n| "+o.size+" |\n")
		return err
	})
	failing := NewScenario[sizeOptions]("broken", "fails", func(context.Context, sizeOptions, io.Writer, io.Writer) error {
		return errors.New("no broker")
	})
	var out strings.Builder
	args := []string{"--scenario", "tiny", "--size", "7", "--record", dir, "--token", "s3cr3t"}
	if err := Main(t.Context(), args, &out, io.Discard, ok, failing); err != nil {
		t.Fatal(err)
	}

	if err := Main(t.Context(), []string{"--scenario", "broken", "--record", dir}, io.Discard, io.Discard, ok, failing); err == nil {
		t.Fatal("a failing scenario succeeded")
	}
	files, err := os.ReadDir(dir)
	if err != nil || len(files) != 1 || !strings.HasSuffix(files[0].Name(), "-tiny.md") {
		t.Fatalf("recorded %v (%v), want one file ending in -tiny.md", files, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, files[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "s3cr3t") {
		t.Fatalf("the record shows the token:\n%s", b)
	}
	for _, want := range []string{"# tiny, ", "- command: `quiverbench --record=" + dir + " --scenario=tiny --size=7 --token=REDACTED`", "- machine: ", "| size |\n| 7 |\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("record lacks %q:\n%s", want, b)
		}
	}
	if out.String() != "| size |\n| 7 |\n" {
		t.Errorf("stdout %q, want the report", out.String())
	}
}

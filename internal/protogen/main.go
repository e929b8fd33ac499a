// Command protogen generates the Go code of Lance's protobuf messages
// (packages under writers/lance/lancepb) from the pinned .proto files of
// the Lance repository vendored in third_party/lance/protos. It compiles
// them with protocompile (a Go-native .proto compiler) and generates with
// the code of protoc-gen-go (its internal_gengo package, at the
// google.golang.org/protobuf version go.mod pins), so generating needs
// neither protoc nor a plugin binary. Run it from the module root through
// `make generate`; the generated files are committed.
package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"
)

const (
	protoDir   = "third_party/lance/protos"
	outDir     = "writers/lance/lancepb"
	modulePath = "github.com/quiver-ingest/quiver/"
)

// goPackages maps every vendored .proto file to its Go package under
// outDir: one per protobuf package (the lance.table files share one).
var goPackages = map[string]string{
	"encodings_v2_0.proto": "encodingspb",   // lance.encodings (format 2.0)
	"encodings_v2_1.proto": "encodings21pb", // lance.encodings21 (format 2.1)
	"file.proto":           "filepb",        // lance.file
	"file2.proto":          "file2pb",       // lance.file.v2
	"index.proto":          "indexpb",       // lance.index.pb
	"index_old.proto":      "tablepb",       // lance.table
	"rowids.proto":         "tablepb",
	"table.proto":          "tablepb",
	"transaction.proto":    "tablepb",
}

func main() {
	if err := run(context.Background(), "."); err != nil {
		fmt.Fprintln(os.Stderr, "protogen:", err)
		os.Exit(1)
	}
}

// run generates into root/outDir, reading root/protoDir.
func run(ctx context.Context, root string) error {
	names := slices.Sorted(maps.Keys(goPackages))
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{filepath.Join(root, protoDir)}}),
		SourceInfoMode: protocompile.SourceInfoStandard, // keeps the comments
	}
	files, err := c.Compile(ctx, names...)
	if err != nil {
		return err
	}
	params := []string{"paths=import"}
	for _, name := range names {
		pkg := goPackages[name]
		params = append(params, fmt.Sprintf("M%s=%s%s/%s;%s", name, modulePath, outDir, pkg, pkg))
	}
	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: names, Parameter: proto.String(strings.Join(params, ","))}
	// Every file after the files it imports, as protoc sends them.
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		for i := range fd.Imports().Len() {
			add(fd.Imports().Get(i).FileDescriptor)
		}
		req.ProtoFile = append(req.ProtoFile, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range files {
		add(f)
	}
	plugin, err := protogen.Options{}.New(req)
	if err != nil {
		return err
	}
	for _, f := range plugin.Files {
		if f.Generate {
			internal_gengo.GenerateFile(plugin, f)
		}
	}
	resp := plugin.Response()
	if resp.Error != nil {
		return fmt.Errorf("generate: %s", resp.GetError())
	}
	// Remove what an earlier run generated, so that a dropped file goes.
	old, err := filepath.Glob(filepath.Join(root, outDir, "*", "*.pb.go"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	for _, f := range resp.File {
		rel, ok := strings.CutPrefix(f.GetName(), modulePath)
		if !ok {
			return fmt.Errorf("generated %s outside the module", f.GetName())
		}
		path := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(f.GetContent()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

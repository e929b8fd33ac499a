// Package filepb holds the generated Go messages of lance.file, the schema fields and file descriptor of Lance files (file.proto), from the Lance
// protos pinned in third_party/lance (make generate; do not edit the
// .pb.go files).
package filepb

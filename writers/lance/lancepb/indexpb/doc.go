// Package indexpb holds the generated Go messages of lance.index.pb, index metadata (index.proto), from the Lance
// protos pinned in third_party/lance (make generate; do not edit the
// .pb.go files).
package indexpb

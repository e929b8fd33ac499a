// Package file2pb holds the generated Go messages of lance.file.v2, the column metadata of Lance file format 2.x (file2.proto), from the Lance
// protos pinned in third_party/lance (make generate; do not edit the
// .pb.go files).
package file2pb

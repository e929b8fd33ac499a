// Package encodings21pb holds the generated Go messages of lance.encodings21, the structural encodings of Lance file format 2.1 (encodings_v2_1.proto), from the Lance
// protos pinned in third_party/lance (make generate; do not edit the
// .pb.go files).
package encodings21pb

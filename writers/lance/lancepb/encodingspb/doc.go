// Package encodingspb holds the generated Go messages of lance.encodings, the page encodings of Lance file format 2.0 (encodings_v2_0.proto), from the Lance
// protos pinned in third_party/lance (make generate; do not edit the
// .pb.go files).
package encodingspb

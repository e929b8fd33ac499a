// Package tablepb holds the generated Go messages of lance.table, manifests, fragments, deletion files, row ids and transactions of Lance datasets (table.proto, transaction.proto, rowids.proto, index_old.proto), from the Lance
// protos pinned in third_party/lance (make generate; do not edit the
// .pb.go files).
package tablepb

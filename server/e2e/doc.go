// Package e2e holds process-level tests of the quiver binary: it builds
// ./server/cmd/quiver, runs it as a child process on 127.0.0.1 with free
// ports, drives it with the Go client, kills it with SIGKILL at the crash
// points the txn package exposes (QUIVER_TEST_CRASH) and checks that a
// restarted server loses nothing and publishes nothing twice.
//
// The package has no non-test code besides this comment.
package e2e

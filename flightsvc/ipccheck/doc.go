// Package ipccheck checks what a Flight client sends before anything
// trusts it: the Arrow IPC headers of every DoPut message, walked with
// bounds before arrow-go allocates from their counts (ParseMessage,
// CheckSchema, CheckBatch), and the arrays arrow-go decoded from them,
// validated in full before a sink encodes them (Validate).
//
// It knows the Arrow IPC format and nothing of Quiver: it must not import
// flightsvc, the sinks (writers/...) or the server.
package ipccheck

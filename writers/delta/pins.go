package delta

import "github.com/quiver-ingest/quiver/writers"

// An upsert's commit conflicts with any commit that removed a file its
// plan read, and once its transaction is decided (on several endpoints,
// some perhaps published already) it must still publish. An upsert
// therefore plans between w.pins.BeginPlan and EndPlan, pinning the
// files it read from Precommit until its Commit succeeds or its key is
// rolled back, and optimize commits through w.pins.Commit and never
// removes a pinned file (tablesink.Pins). The pins are shared by every
// writer of this process on the table. Upserts are committed by the
// server that planned them (their descriptors cannot be handed over);
// after a restart the coordinator hands the writer the upserts it
// recovered (KeepPrecommitted), which pins them again.

// KeepPrecommitted pins the files read by the upsert plans among descs,
// precommitted under key before this writer opened
// (writers.PrecommitKeeper). Descriptors that do not decode are left to
// Commit to refuse.
func (w *Writer) KeepPrecommitted(key writers.TxnKey, descs []writers.Descriptor) {
	if w.cfg.WriteMode != ModeUpsert || w.pins == nil {
		return
	}
	_, upsert, err := w.decodeDescriptors(descs)
	if err != nil || upsert == nil {
		return
	}
	w.pins.Pin(key, upsert.ReadFiles)
}

package delta

import "github.com/quiver-ingest/quiver/writers"

// Pins keep optimize away from the files a precommitted upsert of this
// server planned against: the upsert's commit conflicts with any commit
// that removed a file it read, and once its transaction is decided (on
// several endpoints, some perhaps published already) it must still
// publish. An upsert pins its plan's read files from Precommit until its
// Commit succeeds or the key is rolled back. Upserts are committed on the
// server that planned them (their descriptors cannot be handed over); after
// a restart the coordinator hands the writer the upserts it recovered
// (KeepPrecommitted), which pins them again.

// KeepPrecommitted pins the files read by the upsert plans among descs,
// precommitted under key before this writer opened
// (writers.PrecommitKeeper). Descriptors that do not decode are left to
// Commit to refuse.
func (w *Writer) KeepPrecommitted(key writers.TxnKey, descs []writers.Descriptor) {
	if w.cfg.WriteMode != ModeUpsert {
		return
	}
	_, upsert, err := w.decodeDescriptors(descs)
	if err != nil || upsert == nil {
		return
	}
	w.pin(key, upsert.ReadFiles)
}

// pin records the files key's upsert plan read.
func (w *Writer) pin(key writers.TxnKey, files []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pins == nil {
		w.pins = map[writers.TxnKey][]string{}
	}
	w.pins[key] = files
}

// unpin forgets key's pins.
func (w *Writer) unpin(key writers.TxnKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pins, key)
}

// pinned returns the set of files pinned by any key.
func (w *Writer) pinned() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	set := map[string]bool{}
	for _, files := range w.pins {
		for _, f := range files {
			set[f] = true
		}
	}
	return set
}

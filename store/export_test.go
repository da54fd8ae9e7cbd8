package store

// WriteBatch runs one batch statement for the merges given, in order, and
// returns each one's result: tests use it to put chosen merges into one
// statement.
func (b *MergeBatcher) WriteBatch(uuids []string, kvs []map[string]any) []error {
	batch := make([]*mergeReq, len(uuids))
	for i := range uuids {
		u, _ := canonicalUUID(uuids[i])
		batch[i] = &mergeReq{uuid: u, kv: kvs[i], done: make(chan error, 1)}
	}
	b.write(batch)
	errs := make([]error, len(batch))
	for i, r := range batch {
		errs[i] = <-r.done
	}
	return errs
}

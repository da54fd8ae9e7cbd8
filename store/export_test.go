package store

// WriteBatch runs one batch statement for the merges given, in order, each
// conditional on the node's agent token being tokens[i], and returns each
// one's result: tests use it to put chosen merges into one statement.
func (b *MergeBatcher) WriteBatch(uuids, tokens []string, kvs []map[string]any) []error {
	batch := make([]*mergeReq, len(uuids))
	for i := range uuids {
		u, _ := canonicalUUID(uuids[i])
		batch[i] = &mergeReq{uuid: u, token: tokens[i], kv: kvs[i], done: make(chan error, 1)}
	}
	b.write(batch)
	errs := make([]error, len(batch))
	for i, r := range batch {
		errs[i] = <-r.done
	}
	return errs
}

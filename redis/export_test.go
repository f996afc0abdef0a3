package redis

// setRebaseAt lowers the epoch-rebase threshold so tests reach it
// without waiting 2^31 ms.
func (s *Sketch) setRebaseAt(ms int64) { s.rebaseAt = ms }

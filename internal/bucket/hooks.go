package bucket

// testHooks are the points where deterministic tests hold an operation
// (set per engine from export_test.go; nil in production, so the hot
// path pays one nil check on a field of a read-only line).
type testHooks struct {
	beforeCAS   func()         // after the decision and the header, before the entry's CAS
	afterCheck  func()         // after the last header check, right before the entry's CAS
	afterCAS    func()         // after a successful entry CAS, before the validation
	afterLoad   func()         // in an operation's read of a line, after its entries, before the header's second read
	beforeMove  func(h uint64) // before the header CAS of a move of lw (h: the header it replaces)
	beforeLower func()         // in a give-back (lower), after its read, before its CAS
}

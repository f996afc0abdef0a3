package core

// HasherID returns what a snapshot records of a hasher: its kind (0 for
// a custom hasher, then XXH3 and SipHash, as a sketch snapshot's header
// has it) and its fingerprint, the hash of a fixed probe key, which
// depends on the seed and tells custom hashers apart as far as one probe
// can. The snapshots of internal/bucket record and check them as a
// sketch's header does.
func HasherID(h Hasher) (kind uint8, fingerprint uint64) {
	return hashKindOf(h), h.Sum64String(snapProbe)
}

// HashKindName names a hasher kind of HasherID, for messages.
func HashKindName(k uint8) string { return hashKindName(k) }

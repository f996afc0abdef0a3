package redis

import (
	"strings"
	"testing"
)

// FuzzAudit138InfoField: infoField (what Check's eviction fallback and
// NewGoRedis's AutoPipeliner cluster check read from an INFO reply)
// over replies built from arbitrary fields: sections with "# Name"
// headers, "key:value" lines ended by CRLF (as Redis sends them) or LF,
// values that hold colons and commas ("db0:keys=1,expires=0"). It never
// panics; it finds the value of the first line whose key is the field,
// whole (every colon after the first kept), and no field the reply does
// not hold; a header or a value that mentions the field's name is not
// mistaken for it.
func FuzzAudit138InfoField(f *testing.F) {
	f.Add("maxmemory_policy\x00allkeys-lru\x00used_memory\x001024", "maxmemory_policy", true, uint8(1))
	f.Add("cluster_enabled\x001\x00cluster_enabled\x000", "cluster_enabled", false, uint8(0))
	f.Add("db0\x00keys=1,expires=0:x\x00a\x00maxmemory_policy:noeviction", "maxmemory_policy", true, uint8(3))
	f.Add("x\x00\x00y\x00", "y", true, uint8(2))
	f.Add("", "cluster_enabled", false, uint8(0))
	f.Fuzz(func(t *testing.T, pairs, field string, crlf bool, sections uint8) {
		if len(pairs) > 400 {
			return
		}
		ok := func(s string, key bool) bool {
			if s != strings.TrimSpace(s) || strings.ContainsAny(s, "\r\n") || key && (s == "" || strings.ContainsAny(s, ":#")) {
				return false
			}
			return true
		}
		if !ok(field, true) {
			return
		}
		nl := "\n"
		if crlf {
			nl = "\r\n"
		}
		parts := strings.Split(pairs, "\x00")
		var b strings.Builder
		want, found := "", false
		for i := 0; i+1 < len(parts); i += 2 {
			k, v := parts[i], parts[i+1]
			if !ok(k, true) || !ok(v, false) {
				continue
			}
			if sections>>(uint(i/2)%8)&1 == 1 {
				b.WriteString("# " + field + ":" + v + nl) // a section header naming the field
			}
			b.WriteString(k + ":" + v + nl)
			if k == field && !found {
				want, found = v, true
			}
		}
		if sections&0x80 != 0 {
			b.WriteString(nl) // a reply ends with an empty line
		}
		info := b.String()
		got, gotOK := infoField(info, field)
		if gotOK != found || got != want {
			t.Fatalf("infoField(%q, %q) = %q, %v; want %q, %v", info, field, got, gotOK, want, found)
		}
	})
}

package httplimit

import (
	"strings"
	"unicode/utf8"
)

// sfMember reports whether m, a List member as listMembers returns it
// (trimmed), is an Item or an Inner List with its parameters, as RFC 9651
// §3.1 defines them: a member that is not one makes a recipient discard
// the whole field (§4.2), so addItem drops it rather than let it take
// the middleware's own item with it.
func sfMember(m string) bool {
	rest, ok := "", false
	if strings.HasPrefix(m, "(") {
		rest, ok = sfInnerList(m[1:])
	} else {
		rest, ok = sfBareItem(m)
	}
	if !ok {
		return false
	}
	rest, ok = sfParams(rest)
	return ok && rest == ""
}

// sfInnerList reads an Inner List after its "(": Items separated by
// spaces, then ")". It returns what follows the ")".
func sfInnerList(s string) (string, bool) {
	for {
		s = strings.TrimLeft(s, " ")
		if strings.HasPrefix(s, ")") {
			return s[1:], true
		}
		rest, ok := sfBareItem(s)
		if !ok {
			return "", false
		}
		if rest, ok = sfParams(rest); !ok {
			return "", false
		}
		if rest != "" && rest[0] != ' ' && rest[0] != ')' {
			return "", false
		}
		s = rest
	}
}

// sfParams reads parameters: each ";", spaces, a key, and "=" with a
// bare Item, or no value (true). It returns what follows them.
func sfParams(s string) (string, bool) {
	for strings.HasPrefix(s, ";") {
		s = strings.TrimLeft(s[1:], " ")
		i := 0
		for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] == '*' ||
			i > 0 && (s[i] >= '0' && s[i] <= '9' || s[i] == '_' || s[i] == '-' || s[i] == '.')) {
			i++
		}
		if i == 0 {
			return "", false // a key starts with a lower-case letter or "*"
		}
		s = s[i:]
		if strings.HasPrefix(s, "=") {
			var ok bool
			if s, ok = sfBareItem(s[1:]); !ok {
				return "", false
			}
		}
	}
	return s, true
}

// sfBareItem reads a bare Item (Integer, Decimal, String, Token, Byte
// Sequence, Boolean, Date, Display String) at the start of s and returns
// what follows it.
func sfBareItem(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	switch c := s[0]; {
	case c == '-' || c >= '0' && c <= '9':
		return sfNumber(s)
	case c == '"':
		for i := 1; i < len(s); i++ {
			switch {
			case s[i] == '\\':
				if i+1 >= len(s) || s[i+1] != '"' && s[i+1] != '\\' {
					return "", false
				}
				i++
			case s[i] == '"':
				return s[i+1:], true
			case s[i] < 0x20 || s[i] > 0x7e:
				return "", false
			}
		}
		return "", false
	case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '*':
		i := 1
		for i < len(s) && (sfTchar(s[i]) || s[i] == ':' || s[i] == '/') {
			i++
		}
		return s[i:], true
	case c == ':':
		i := 1
		for i < len(s) && (s[i] >= 'A' && s[i] <= 'Z' || s[i] >= 'a' && s[i] <= 'z' || s[i] >= '0' && s[i] <= '9' || s[i] == '+' || s[i] == '/' || s[i] == '=') {
			i++
		}
		if i >= len(s) || s[i] != ':' {
			return "", false
		}
		return s[i+1:], true
	case c == '?':
		if len(s) < 2 || s[1] != '0' && s[1] != '1' {
			return "", false
		}
		return s[2:], true
	case c == '@':
		rest, ok := sfNumber(s[1:])
		return rest, ok && !strings.Contains(s[1:len(s)-len(rest)], ".")
	case c == '%':
		if len(s) < 2 || s[1] != '"' {
			return "", false
		}
		var decoded []byte // the octets, which must be UTF-8 (§4.2.10)
		for i := 2; i < len(s); i++ {
			switch {
			case s[i] == '%':
				if i+2 >= len(s) || !sfLowerHex(s[i+1]) || !sfLowerHex(s[i+2]) {
					return "", false
				}
				decoded = append(decoded, sfHex(s[i+1])<<4|sfHex(s[i+2]))
				i += 2
			case s[i] == '"':
				return s[i+1:], utf8.Valid(decoded)
			case s[i] < 0x20 || s[i] > 0x7e:
				return "", false
			default:
				decoded = append(decoded, s[i])
			}
		}
		return "", false
	}
	return "", false
}

// sfNumber reads an Integer (at most 15 digits) or a Decimal (at most 12
// digits, ".", 1 to 3 digits), optionally negative.
func sfNumber(s string) (string, bool) {
	i := 0
	if strings.HasPrefix(s, "-") {
		i = 1
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	whole := i - start
	if whole == 0 || whole > 15 {
		return "", false
	}
	if i < len(s) && s[i] == '.' {
		if whole > 12 {
			return "", false
		}
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if frac := j - i - 1; frac < 1 || frac > 3 {
			return "", false
		}
		i = j
	}
	return s[i:], true
}

// sfTchar reports whether c is an RFC 9110 tchar.
func sfTchar(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func sfLowerHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

// sfHex is the value of a lower-case hex digit.
func sfHex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

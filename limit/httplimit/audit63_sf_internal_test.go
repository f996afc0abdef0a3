package httplimit

import (
	"fmt"
	"strconv"
	"strings"
)

// ---- a strict RFC 9651 List parser (every bare item type: Integer,
// Decimal, String, Token, Byte Sequence, Boolean, Date, Display String;
// inner lists; parameters, a repeated key overwriting the earlier value
// as §4.2.3.2 says), written for audit 63 to check what SetHeaders writes.

type a63Val struct {
	kind string // "int", "dec", "str", "tok", "bin", "bool", "date", "dstr", "inner"
	s    string // an int's digits, a string's content, ...
	n    int64  // int and date
}

type a63Member struct {
	text   string // the member's text in the field, trimmed
	bare   a63Val
	params map[string]a63Val
}

type a63Parser struct {
	s string
	i int
}

func (p *a63Parser) errf(f string, a ...any) error {
	return fmt.Errorf("at %d of %q: %s", p.i, p.s, fmt.Sprintf(f, a...))
}

func (p *a63Parser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func a63ParseList(s string) ([]a63Member, error) {
	p := &a63Parser{s: s}
	for p.peek() == ' ' {
		p.i++
	}
	var out []a63Member
	for p.i < len(p.s) {
		st := p.i
		var m a63Member
		var err error
		if p.peek() == '(' {
			m.bare, err = p.inner()
		} else {
			m.bare, err = p.bareItem()
		}
		if err != nil {
			return nil, err
		}
		if m.params, err = p.params(); err != nil {
			return nil, err
		}
		m.text = p.s[st:p.i]
		out = append(out, m)
		for p.peek() == ' ' || p.peek() == '\t' {
			p.i++
		}
		if p.i == len(p.s) {
			return out, nil
		}
		if p.peek() != ',' {
			return nil, p.errf("want ','")
		}
		p.i++
		for p.peek() == ' ' || p.peek() == '\t' {
			p.i++
		}
		if p.i == len(p.s) {
			return nil, p.errf("trailing comma")
		}
	}
	return out, nil
}

func (p *a63Parser) inner() (a63Val, error) {
	st := p.i
	p.i++ // (
	for {
		for p.peek() == ' ' {
			p.i++
		}
		if p.i >= len(p.s) {
			return a63Val{}, p.errf("unclosed inner list")
		}
		if p.peek() == ')' {
			p.i++
			return a63Val{kind: "inner", s: p.s[st:p.i]}, nil
		}
		if _, err := p.bareItem(); err != nil {
			return a63Val{}, err
		}
		if _, err := p.params(); err != nil {
			return a63Val{}, err
		}
		if c := p.peek(); c != ' ' && c != ')' {
			return a63Val{}, p.errf("bad inner list")
		}
	}
}

func (p *a63Parser) params() (map[string]a63Val, error) {
	out := map[string]a63Val{}
	for p.peek() == ';' {
		p.i++
		for p.peek() == ' ' {
			p.i++
		}
		k, err := p.key()
		if err != nil {
			return nil, err
		}
		v := a63Val{kind: "bool", s: "?1", n: 1}
		if p.peek() == '=' {
			p.i++
			if v, err = p.bareItem(); err != nil {
				return nil, err
			}
		}
		out[k] = v // a repeated key overwrites (RFC 9651 §4.2.3.2)
	}
	return out, nil
}

func (p *a63Parser) key() (string, error) {
	st := p.i
	c := p.peek()
	if !(c >= 'a' && c <= 'z' || c == '*') {
		return "", p.errf("bad key")
	}
	p.i++
	for {
		c := p.peek()
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*' {
			p.i++
			continue
		}
		return p.s[st:p.i], nil
	}
}

func a63Tchar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 && c != 0
}

func (p *a63Parser) bareItem() (a63Val, error) {
	c := p.peek()
	switch {
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == '"':
		s, err := p.str()
		return a63Val{kind: "str", s: s}, err
	case c == '*' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		st := p.i
		p.i++
		for a63Tchar(p.peek()) || p.peek() == ':' || p.peek() == '/' {
			p.i++
		}
		return a63Val{kind: "tok", s: p.s[st:p.i]}, nil
	case c == ':':
		p.i++
		st := p.i
		for {
			c := p.peek()
			if c == ':' {
				p.i++
				return a63Val{kind: "bin", s: p.s[st : p.i-1]}, nil
			}
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
				return a63Val{}, p.errf("bad byte sequence")
			}
			p.i++
		}
	case c == '?':
		p.i++
		switch p.peek() {
		case '0', '1':
			p.i++
			return a63Val{kind: "bool", s: p.s[p.i-2 : p.i]}, nil
		}
		return a63Val{}, p.errf("bad boolean")
	case c == '@':
		p.i++
		v, err := p.number()
		if err != nil || v.kind != "int" {
			return a63Val{}, p.errf("bad date")
		}
		return a63Val{kind: "date", n: v.n}, nil
	case c == '%':
		p.i++
		if p.peek() != '"' {
			return a63Val{}, p.errf("bad display string")
		}
		p.i++
		var b strings.Builder
		for p.i < len(p.s) {
			c := p.s[p.i]
			p.i++
			switch {
			case c == '"':
				return a63Val{kind: "dstr", s: b.String()}, nil
			case c == '%':
				if p.i+2 > len(p.s) {
					return a63Val{}, p.errf("bad display string escape")
				}
				h := p.s[p.i : p.i+2]
				if strings.Trim(h, "0123456789abcdef") != "" {
					return a63Val{}, p.errf("bad display string escape")
				}
				n, _ := strconv.ParseUint(h, 16, 8)
				b.WriteByte(byte(n))
				p.i += 2
			case c < 0x20 || c > 0x7e:
				return a63Val{}, p.errf("bad display string char")
			default:
				b.WriteByte(c)
			}
		}
		return a63Val{}, p.errf("unclosed display string")
	}
	return a63Val{}, p.errf("bad bare item")
}

func (p *a63Parser) number() (a63Val, error) {
	st := p.i
	if p.peek() == '-' {
		p.i++
	}
	ds := p.i
	for p.peek() >= '0' && p.peek() <= '9' {
		p.i++
	}
	nd := p.i - ds
	if nd == 0 {
		return a63Val{}, p.errf("no digits")
	}
	if p.peek() != '.' {
		if nd > 15 {
			return a63Val{}, p.errf("integer too long")
		}
		n, _ := strconv.ParseInt(p.s[st:p.i], 10, 64)
		return a63Val{kind: "int", s: p.s[st:p.i], n: n}, nil
	}
	if nd > 12 {
		return a63Val{}, p.errf("decimal too long")
	}
	p.i++
	fs := p.i
	for p.peek() >= '0' && p.peek() <= '9' {
		p.i++
	}
	if f := p.i - fs; f < 1 || f > 3 {
		return a63Val{}, p.errf("bad fraction")
	}
	return a63Val{kind: "dec", s: p.s[st:p.i]}, nil
}

func (p *a63Parser) str() (string, error) {
	p.i++ // "
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.i >= len(p.s) || p.s[p.i] != '"' && p.s[p.i] != '\\' {
				return "", p.errf("bad escape")
			}
			b.WriteByte(p.s[p.i])
			p.i++
		case c == '"':
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", p.errf("bad string char")
		default:
			b.WriteByte(c)
		}
	}
	return "", p.errf("unclosed string")
}

// a63ExhaustedT is the largest t of the members with r=0 (both Integers),
// as RFC 9651 reads the parameters (the last of a repeated key).
func a63ExhaustedT(ms []a63Member) int64 {
	var t int64
	for _, m := range ms {
		r, ok := m.params["r"]
		tt, ok2 := m.params["t"]
		if ok && ok2 && r.kind == "int" && r.n == 0 && tt.kind == "int" {
			t = max(t, tt.n)
		}
	}
	return t
}

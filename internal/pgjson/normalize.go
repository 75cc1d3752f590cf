package pgjson

import (
	"bytes"
	"cmp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Normalize returns b as PostgreSQL's jsonb gives it back (jsonb_out): the
// keys of each object in jsonb's order (shorter keys first, then byte order)
// with the last of duplicate keys kept; numbers in numeric's normal form
// (1e2 → 100, 1.50 → 1.50, -0 → 0, 1.0e-3 → 0.0010); strings with escapes
// decoded and re-escaped as jsonb does (only ", \, and control characters);
// ", " between elements and ": " after keys, no other whitespace. b must be
// a text Validate accepts; on any other Normalize returns Validate's error.
func Normalize(b []byte) ([]byte, error) {
	if err := Validate(b); err != nil {
		return nil, err
	}
	p := &normalizer{in: b}
	p.skipSpace()
	var out bytes.Buffer
	out.Grow(len(b) + len(b)/8)
	p.value(&out)
	return out.Bytes(), nil
}

// normalizer walks a text Validate accepted; it never meets a syntax error.
type normalizer struct {
	in  []byte
	pos int
}

func (p *normalizer) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *normalizer) value(out *bytes.Buffer) {
	switch c := p.in[p.pos]; {
	case c == '{':
		p.object(out)
	case c == '[':
		p.array(out)
	case c == '"':
		writeString(out, p.str())
	case c == 't':
		p.pos += 4
		out.WriteString("true")
	case c == 'f':
		p.pos += 5
		out.WriteString("false")
	case c == 'n':
		p.pos += 4
		out.WriteString("null")
	default:
		p.number(out)
	}
}

func (p *normalizer) array(out *bytes.Buffer) {
	p.pos++ // [
	out.WriteByte('[')
	p.skipSpace()
	if p.in[p.pos] == ']' {
		p.pos++
		out.WriteByte(']')
		return
	}
	for first := true; ; first = false {
		if !first {
			out.WriteString(", ")
		}
		p.skipSpace()
		p.value(out)
		p.skipSpace()
		if p.in[p.pos] == ']' {
			p.pos++
			out.WriteByte(']')
			return
		}
		p.pos++ // ,
	}
}

type member struct {
	key   string
	value []byte
	order int
}

func (p *normalizer) object(out *bytes.Buffer) {
	p.pos++ // {
	p.skipSpace()
	var members []member
	if p.in[p.pos] != '}' {
		for {
			p.skipSpace()
			key := p.str()
			p.skipSpace()
			p.pos++ // :
			p.skipSpace()
			var v bytes.Buffer
			p.value(&v)
			members = append(members, member{key, v.Bytes(), len(members)})
			p.skipSpace()
			if p.in[p.pos] == '}' {
				break
			}
			p.pos++ // ,
		}
	}
	p.pos++ // }
	// jsonb's order: length, then bytes; of equal keys the last one written wins.
	slices.SortStableFunc(members, func(a, b member) int {
		if c := cmp.Compare(len(a.key), len(b.key)); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	out.WriteByte('{')
	n := 0
	for i, m := range members {
		if i+1 < len(members) && members[i+1].key == m.key {
			continue // a later duplicate follows (stable sort kept input order)
		}
		if n > 0 {
			out.WriteString(", ")
		}
		writeString(out, m.key)
		out.WriteString(": ")
		out.Write(m.value)
		n++
	}
	out.WriteByte('}')
}

// str reads a string literal and returns its decoded text.
func (p *normalizer) str() string {
	p.pos++ // opening quote
	var sb strings.Builder
	for {
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			return sb.String()
		case c != '\\':
			start := p.pos
			for p.pos < len(p.in) && p.in[p.pos] != '"' && p.in[p.pos] != '\\' {
				p.pos++
			}
			sb.Write(p.in[start:p.pos])
			continue
		}
		// An escape.
		e := p.in[p.pos+1]
		p.pos += 2
		switch e {
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r, _ := hex4(p.in[p.pos:])
			p.pos += 4
			if utf16.IsSurrogate(r) { // Validate ensured a low surrogate follows
				r2, _ := hex4(p.in[p.pos+2:])
				p.pos += 6
				r = utf16.DecodeRune(r, r2)
			}
			sb.WriteRune(r)
		default: // " \ /
			sb.WriteByte(e)
		}
	}
}

// writeString writes s quoted as jsonb's output does (escape_json).
func writeString(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			_, n := utf8.DecodeRuneInString(s[i:])
			out.WriteString(s[i : i+n])
			i += n
			continue
		}
		switch c {
		case '\b':
			out.WriteString(`\b`)
		case '\f':
			out.WriteString(`\f`)
		case '\n':
			out.WriteString(`\n`)
		case '\r':
			out.WriteString(`\r`)
		case '\t':
			out.WriteString(`\t`)
		case '"':
			out.WriteString(`\"`)
		case '\\':
			out.WriteString(`\\`)
		default:
			if c < 0x20 {
				out.WriteString(`\u00`)
				out.WriteByte("0123456789abcdef"[c>>4])
				out.WriteByte("0123456789abcdef"[c&0xf])
			} else {
				out.WriteByte(c)
			}
		}
		i++
	}
	out.WriteByte('"')
}

// number writes a JSON number as numeric_out writes numeric_in's value: no
// exponent, the digits after the point being those written less the
// exponent (at least none), no sign on zero.
func (p *normalizer) number(out *bytes.Buffer) {
	start := p.pos
	neg := false
	if p.in[p.pos] == '-' {
		neg = true
		p.pos++
	}
	digitsEnd := func() int {
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
		}
		return p.pos
	}
	intStart := p.pos
	intPart := string(p.in[intStart:digitsEnd()])
	var frac string
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		fs := p.pos
		frac = string(p.in[fs:digitsEnd()])
	}
	exp := int64(0)
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		es := p.pos
		if p.in[p.pos] == '+' || p.in[p.pos] == '-' {
			p.pos++
		}
		digitsEnd()
		e, err := strconv.ParseInt(string(p.in[es:p.pos]), 10, 64)
		if err != nil { // beyond int64: Validate refused it already
			out.Write(p.in[start:p.pos])
			return
		}
		exp = e
	}
	scale := max(0, int64(len(frac))-exp)
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" { // zero: no sign, the scale's zeros
		out.WriteByte('0')
		if scale > 0 {
			out.WriteByte('.')
			out.WriteString(strings.Repeat("0", int(scale)))
		}
		return
	}
	// The point sits after point digits of intPart+frac; the leading zeros
	// trimmed above move it left.
	point := int64(len(intPart)) + exp - int64(len(intPart+frac)-len(digits))
	if neg {
		out.WriteByte('-')
	}
	switch {
	case point <= 0:
		out.WriteString("0.")
		out.WriteString(strings.Repeat("0", int(-point)))
		out.WriteString(digits)
	case point >= int64(len(digits)):
		out.WriteString(digits)
		out.WriteString(strings.Repeat("0", int(point)-len(digits)))
	default:
		out.WriteString(digits[:point])
		out.WriteByte('.')
		out.WriteString(digits[point:])
	}
	// The digits after the point are exactly scale many: len(frac) - exp of
	// them when that is positive (trailing zeros included), none otherwise.
}

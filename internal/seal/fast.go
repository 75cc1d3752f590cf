package seal

import (
	"bytes"
	"encoding/json"
)

// sealedPrefix starts a sealed value in jsonb's output form, whose keys
// come shorter first: box, key, subject.
var sealedPrefix = []byte(`{"` + SealedKey + `": {"box": `)

// span is one sealed value found in a text in jsonb's form: b[start:end]
// is the whole {"pgdcb.sealed": …} object.
type span struct {
	start, end int
	v          sealedValue
}

// scan finds the sealed values of b, a text in jsonb's output form (as
// the stores hold and read it), without decoding the rest of it. ok is
// false when a value does not have exactly the form Seal writes (box, key,
// subject, nothing else): the caller then decodes b.
func scan(b []byte) (spans []span, ok bool) {
	for i := 0; ; {
		j := bytes.Index(b[i:], sealedPrefix)
		if j < 0 {
			return spans, true
		}
		// Outside strings, jsonb's text has no unescaped quote, so the
		// prefix starts an object.
		start := i + j
		p := start + len(sealedPrefix)
		var s span
		var good bool
		if s.v.box, p, good = str(b, p); !good || !lit(b, &p, `, "key": `) {
			return nil, false
		}
		if s.v.key, p, good = str(b, p); !good || !lit(b, &p, `, "subject": `) {
			return nil, false
		}
		if s.v.subject, p, good = str(b, p); !good || !lit(b, &p, `}}`) {
			return nil, false
		}
		s.start, s.end = start, p
		spans = append(spans, s)
		i = p
	}
}

// str reads the JSON string at b[p:], returning its value and the index
// after it.
func str(b []byte, p int) (string, int, bool) {
	if p >= len(b) || b[p] != '"' {
		return "", p, false
	}
	esc := false
	for q := p + 1; q < len(b); q++ {
		switch {
		case esc:
			esc = false
		case b[q] == '\\':
			esc = true
		case b[q] == '"':
			tok := b[p : q+1]
			if bytes.IndexByte(tok, '\\') < 0 {
				return string(tok[1 : len(tok)-1]), q + 1, true
			}
			var v string
			if err := json.Unmarshal(tok, &v); err != nil {
				return "", p, false
			}
			return v, q + 1, true
		}
	}
	return "", p, false
}

// lit consumes the literal s at b[*p:].
func lit(b []byte, p *int, s string) bool {
	if !bytes.HasPrefix(b[*p:], []byte(s)) {
		return false
	}
	*p += len(s)
	return true
}

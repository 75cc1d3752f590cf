// Package pgjson checks, in Go and before anything is sent, that a JSON text
// is one PostgreSQL's jsonb input accepts.
//
// encoding/json's Valid accepts texts that jsonb refuses: invalid UTF-8 inside
// a string (SQLSTATE 22021), the escape \u0000 (22P05), a UTF-16 surrogate
// escape that is not a high surrogate immediately followed by a low one
// (22P02), and numbers outside the range of PostgreSQL's numeric (22003).
// Validate refuses all of those, and everything json.Valid refuses, in one
// pass over the bytes without allocating (except for the error it returns).
//
// It also refuses nesting deeper than MaxDepth, a bound of its own: the
// server parses recursively and gives up with "stack depth limit exceeded"
// (54001) at a depth that depends on max_stack_depth. On PostgreSQL 15,
// measured: with the default max_stack_depth of 2MB jsonb accepts 13,099
// nested objects and 14,554 nested arrays; with the smallest setting, 100kB,
// 632 and 701. MaxDepth is below both, so a text Validate accepts never hits
// the server's limit whatever max_stack_depth is set to.
//
// Size limits are the caller's (see eventstore.Config.MaxEventBytes).
package pgjson

import (
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// MaxDepth is the deepest nesting of arrays and objects Validate accepts: a
// text of 512 nested arrays passes, 513 do not. See the package comment.
const MaxDepth = 512

// Limits of PostgreSQL's numeric type (src/backend/utils/adt/numeric.c): the
// weight of the first base-10000 digit is an int16 and the display scale (the
// digits after the decimal point) a 14-bit field. The input routine refuses an
// exponent of INT_MAX/2 or more in either direction before anything else.
const (
	// MaxNumericIntegerDigits is the most digits a number may have before its
	// decimal point (once its exponent is applied): 4 × (32767+1).
	MaxNumericIntegerDigits = 131072
	// MaxNumericScale is the most digits a number may have after its decimal
	// point (as written, trailing zeros included, less its exponent).
	MaxNumericScale    = 16383
	maxNumericExponent = 1<<31/2 - 1 // INT_MAX/2: refused from here on
)

// Error says where a JSON text goes wrong for jsonb and why.
type Error struct {
	// Offset is the byte offset in the text where the problem was found.
	Offset int
	// Reason says what is wrong, for example "\\u0000 escape (jsonb cannot
	// store NUL)".
	Reason string
	// Limit is true when the text nests deeper than MaxDepth, a bound of this
	// package: the server may accept it.
	Limit bool
}

func (e *Error) Error() string {
	return e.Reason + " at offset " + strconv.Itoa(e.Offset)
}

// Valid reports whether Validate accepts b.
func Valid(b []byte) bool { return Validate(b) == nil }

// Validate returns nil when b is one JSON value (RFC 8259, surrounded by
// optional whitespace) that PostgreSQL's jsonb input accepts and that nests at
// most MaxDepth deep; otherwise an *Error.
func Validate(b []byte) error {
	p := parser{b: b}
	return p.run()
}

// ValidateString is Validate for a string.
func ValidateString(s string) error {
	// No copy: Validate never writes to, or keeps, its input.
	return Validate(unsafeBytes(s))
}

type parser struct {
	b     []byte
	i     int
	depth int
	// kinds is a bit per open container: 1 for an object, 0 for an array.
	kinds [MaxDepth / 64]uint64
}

func (p *parser) fail(reason string) error {
	return &Error{Offset: p.i, Reason: reason}
}

func (p *parser) skipSpace() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) inObject() bool {
	d := p.depth - 1
	return p.kinds[d/64]&(1<<(d%64)) != 0
}

func (p *parser) push(object bool) error {
	if p.depth == MaxDepth {
		return &Error{Offset: p.i, Reason: "nested deeper than " + strconv.Itoa(MaxDepth), Limit: true}
	}
	d := p.depth
	if object {
		p.kinds[d/64] |= 1 << (d % 64)
	} else {
		p.kinds[d/64] &^= 1 << (d % 64)
	}
	p.depth++
	p.i++
	return nil
}

func (p *parser) run() error {
	// After a value: the state machine either ends, expects a separator or a
	// closing bracket. "value" reads one value; "key" reads a member name and
	// its colon.
	const (
		stValue = iota
		stKey
		stAfter
	)
	st := stValue
	for {
		p.skipSpace()
		switch st {
		case stValue:
			if p.i >= len(p.b) {
				return p.fail("unexpected end of JSON input")
			}
			switch c := p.b[p.i]; {
			case c == '{':
				if err := p.push(true); err != nil {
					return err
				}
				p.skipSpace()
				if p.i < len(p.b) && p.b[p.i] == '}' {
					p.i++
					p.depth--
					st = stAfter
				} else {
					st = stKey
				}
				continue
			case c == '[':
				if err := p.push(false); err != nil {
					return err
				}
				p.skipSpace()
				if p.i < len(p.b) && p.b[p.i] == ']' {
					p.i++
					p.depth--
					st = stAfter
				}
				continue
			case c == '"':
				if err := p.str(); err != nil {
					return err
				}
			case c == '-' || c >= '0' && c <= '9':
				if err := p.number(); err != nil {
					return err
				}
			case c == 't':
				if err := p.literal("true"); err != nil {
					return err
				}
			case c == 'f':
				if err := p.literal("false"); err != nil {
					return err
				}
			case c == 'n':
				if err := p.literal("null"); err != nil {
					return err
				}
			default:
				return p.fail("invalid character " + strconv.QuoteRune(rune(c)) + " looking for a value")
			}
			st = stAfter
		case stKey:
			if p.i >= len(p.b) || p.b[p.i] != '"' {
				return p.fail("object member name expected")
			}
			if err := p.str(); err != nil {
				return err
			}
			p.skipSpace()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return p.fail("':' expected after an object member name")
			}
			p.i++
			st = stValue
		case stAfter:
			if p.depth == 0 {
				if p.i != len(p.b) {
					return p.fail("unexpected data after the JSON value")
				}
				return nil
			}
			if p.i >= len(p.b) {
				return p.fail("unexpected end of JSON input")
			}
			c := p.b[p.i]
			switch {
			case c == ',':
				p.i++
				if p.inObject() {
					st = stKey
				} else {
					st = stValue
				}
			case c == '}' && p.inObject(), c == ']' && !p.inObject():
				p.i++
				p.depth--
			default:
				return p.fail("',' or a closing bracket expected")
			}
		}
	}
}

func (p *parser) literal(word string) error {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return p.fail("invalid literal (want " + word + ")")
	}
	p.i += len(word)
	return nil
}

// str reads a string starting at its opening quote.
func (p *parser) str() error {
	p.i++          // opening quote
	hi := rune(-1) // a pending high surrogate
	for {
		if p.i >= len(p.b) {
			return p.fail("unexpected end of JSON input in a string")
		}
		c := p.b[p.i]
		if c == '\\' && p.i+1 < len(p.b) && p.b[p.i+1] == 'u' {
			r, ok := hex4(p.b[p.i+2:])
			if !ok {
				return p.fail("\\u must be followed by 4 hexadecimal digits")
			}
			switch {
			case r >= 0xD800 && r <= 0xDBFF:
				if hi >= 0 {
					return p.fail("a UTF-16 high surrogate escape follows another high surrogate")
				}
				hi = r
			case r >= 0xDC00 && r <= 0xDFFF:
				if hi < 0 {
					return p.fail("a UTF-16 low surrogate escape does not follow a high surrogate")
				}
				hi = -1
			default:
				if hi >= 0 {
					return p.fail("a UTF-16 high surrogate escape is not followed by a low surrogate")
				}
				if r == 0 {
					return p.fail("\\u0000 escape (jsonb cannot store NUL)")
				}
			}
			p.i += 6
			continue
		}
		if hi >= 0 {
			return p.fail("a UTF-16 high surrogate escape is not followed by a low surrogate")
		}
		switch {
		case c == '"':
			p.i++
			return nil
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return p.fail("unexpected end of JSON input in a string")
			}
			switch p.b[p.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
			default:
				p.i++
				return p.fail("invalid escape in a string")
			}
		case c < 0x20:
			return p.fail("control character " + strconv.QuoteRune(rune(c)) + " in a string (escape it)")
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size == 1 {
				return p.fail("invalid UTF-8 in a string")
			}
			p.i += size
		}
	}
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// number reads a number (RFC 8259 grammar) and checks it fits PostgreSQL's
// numeric, the type jsonb stores numbers in.
func (p *parser) number() error {
	start := p.i
	b := p.b
	if b[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(b) && b[p.i] >= '0' && b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	// Integer part: 0, or a non-zero digit and more digits.
	if p.i >= len(b) || b[p.i] < '0' || b[p.i] > '9' {
		return p.fail("a digit expected in a number")
	}
	intStart := p.i
	var intDigits int
	if b[p.i] == '0' {
		p.i++
		intDigits = 1
	} else {
		intDigits = digits()
	}
	intZero := b[intStart] == '0' // "0" is the only integer part that starts with 0
	// Fraction.
	fracDigits, firstNonZero := 0, -1 // index in the fraction of its first non-zero digit
	if p.i < len(b) && b[p.i] == '.' {
		p.i++
		fracStart := p.i
		fracDigits = digits()
		if fracDigits == 0 {
			return p.fail("a digit expected after the decimal point")
		}
		if intZero {
			for k := fracStart; k < p.i; k++ {
				if b[k] != '0' {
					firstNonZero = k - fracStart
					break
				}
			}
		}
	}
	// Exponent, saturated (anything past maxNumericExponent is refused).
	exp := int64(0)
	if p.i < len(b) && (b[p.i] == 'e' || b[p.i] == 'E') {
		p.i++
		neg := false
		if p.i < len(b) && (b[p.i] == '+' || b[p.i] == '-') {
			neg = b[p.i] == '-'
			p.i++
		}
		if p.i >= len(b) || b[p.i] < '0' || b[p.i] > '9' {
			return p.fail("a digit expected in an exponent")
		}
		for p.i < len(b) && b[p.i] >= '0' && b[p.i] <= '9' {
			if exp < 1<<40 {
				exp = exp*10 + int64(b[p.i]-'0')
			}
			p.i++
		}
		if neg {
			exp = -exp
		}
	}
	if exp >= maxNumericExponent || exp <= -maxNumericExponent {
		p.i = start
		return p.fail("number out of the range of PostgreSQL's numeric (exponent)")
	}
	// Digits after the decimal point once the exponent is applied.
	if scale := int64(fracDigits) - exp; scale > MaxNumericScale {
		p.i = start
		return p.fail("number out of the range of PostgreSQL's numeric (more than " +
			strconv.Itoa(MaxNumericScale) + " digits after the decimal point)")
	}
	// The decimal exponent of the first non-zero digit; zero has none.
	var e10 int64
	switch {
	case !intZero:
		e10 = int64(intDigits-1) + exp
	case firstNonZero >= 0:
		e10 = -int64(firstNonZero+1) + exp
	default:
		return nil // zero
	}
	if e10 >= MaxNumericIntegerDigits {
		p.i = start
		return p.fail("number out of the range of PostgreSQL's numeric (more than " +
			strconv.Itoa(MaxNumericIntegerDigits) + " digits before the decimal point)")
	}
	// A small e10 needs a scale above MaxNumericScale, refused above.
	return nil
}

func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// Package seal is crypto-shredding's JSON side, shared by the PostgreSQL
// store and memstore: it finds the personal-field markers an application
// puts in an event's data (pgdcb.Personal), seals each marked value with
// AES-256-GCM under its subject's data key, and opens sealed values again
// on reads, giving null (Redacted) where the key is gone (docs/LIFECYCLE.md,
// "Erasing a person's data").
//
// A marker is {"pgdcb.personal": {"subject": S, "value": V}}; a sealed value
// is {"pgdcb.sealed": {"subject": S, "key": K, "box": B}}, B being the
// base64 of a 12-byte nonce and the ciphertext of V (in jsonb's form),
// authenticated with S and K as additional data.
package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/pgdcb/pgdcb/internal/pgjson"
)

const (
	// MarkerKey is the one key of a personal-field marker.
	MarkerKey = "pgdcb.personal"
	// SealedKey is the one key of a sealed value.
	SealedKey = "pgdcb.sealed"
	// KeySize is a data key's size in bytes (AES-256).
	KeySize = 32
	// MaxSubjectBytes is the longest subject id, a tag value's limit (the
	// erasure event tags it).
	MaxSubjectBytes = 256
)

// Redacted is what a read gives for a sealed value whose key was erased.
var Redacted = json.RawMessage("null")

var (
	markerBytes = []byte(`"` + MarkerKey + `"`)
	sealedBytes = []byte(`"` + SealedKey + `"`)
)

// Marked reports whether b may hold a personal-field marker (a byte search:
// false is certain).
func Marked(b []byte) bool { return bytes.Contains(b, markerBytes) }

// Sealed reports whether b may hold a sealed value (a byte search: false is
// certain).
func Sealed(b []byte) bool { return bytes.Contains(b, sealedBytes) }

// CheckSubject refuses a subject id that cannot tag the erasure event: it
// must be 1..256 bytes of UTF-8 without NUL.
func CheckSubject(subject string) error {
	switch {
	case subject == "":
		return errors.New("subject must not be empty")
	case len(subject) > MaxSubjectBytes:
		return fmt.Errorf("subject is %d bytes, more than %d", len(subject), MaxSubjectBytes)
	case !utf8.ValidString(subject) || bytes.IndexByte([]byte(subject), 0) >= 0:
		return errors.New("subject must be UTF-8 without NUL")
	}
	return nil
}

// Subjects returns the subjects of the markers in b, sorted, each once, or
// an error naming a malformed marker.
func Subjects(b []byte) ([]string, error) {
	if !Marked(b) {
		return nil, nil
	}
	v, err := decode(b)
	if err != nil {
		return nil, err
	}
	var out []string
	var bad error
	walk(v, func(m map[string]any) (any, bool) {
		if inner, ok := m[MarkerKey]; ok && len(m) == 1 {
			s, err := markerOf(inner)
			if err != nil {
				bad = err
			}
			out = append(out, s)
			return nil, false
		}
		return nil, false
	})
	if bad != nil {
		return nil, bad
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Key is a subject's data key.
type Key struct {
	ID  string // the key row's id (a UUID's text)
	Key []byte // KeySize bytes
}

// Seal returns b with every marker replaced by its sealed value, under
// keys[subject] (which must hold every subject Subjects returned). b
// without markers is returned as is.
func Seal(b []byte, keys map[string]Key) ([]byte, error) {
	if !Marked(b) {
		return b, nil
	}
	v, err := decode(b)
	if err != nil {
		return nil, err
	}
	var bad error
	v = walk(v, func(m map[string]any) (any, bool) {
		inner, ok := m[MarkerKey]
		if !ok || len(m) != 1 {
			return nil, false
		}
		s, err := markerOf(inner)
		if err != nil {
			bad = err
			return nil, false
		}
		k, ok := keys[s]
		if !ok {
			bad = fmt.Errorf("no key for subject %q", s)
			return nil, false
		}
		plain, err := pgjson.Normalize(inner.(map[string]any)["value"].(json.RawMessage))
		if err != nil {
			bad = err
			return nil, false
		}
		box, err := sealBox(k, s, plain)
		if err != nil {
			bad = err
			return nil, false
		}
		return map[string]any{SealedKey: map[string]any{"subject": s, "key": k.ID, "box": box}}, true
	})
	if bad != nil {
		return nil, bad
	}
	return encode(v)
}

// KeyIDs returns the key ids of the sealed values in b, each once.
func KeyIDs(b []byte) []string {
	if !Sealed(b) {
		return nil
	}
	if spans, ok := scan(b); ok {
		out := make([]string, 0, len(spans))
		for _, s := range spans {
			out = append(out, s.v.key)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	v, err := decode(b)
	if err != nil {
		return nil
	}
	var out []string
	walk(v, func(m map[string]any) (any, bool) {
		if s, ok := sealedOf(m); ok {
			out = append(out, s.key)
		}
		return nil, false
	})
	slices.Sort(out)
	return slices.Compact(out)
}

// Open returns b with every sealed value replaced by its plaintext when
// key(id) gives its key, else by Redacted (the key was erased, or the box
// does not open under it). b without sealed values is returned as is; so is
// b when it is not JSON.
func Open(b []byte, key func(id string) ([]byte, bool)) []byte {
	if !Sealed(b) {
		return b
	}
	if spans, ok := scan(b); ok {
		// In jsonb's form already, and so is each plaintext (Seal
		// normalised it): splicing keeps the form.
		var out []byte
		last := 0
		for _, s := range spans {
			out = append(out, b[last:s.start]...)
			out = append(out, openValue(s.v, key)...)
			last = s.end
		}
		return append(out, b[last:]...)
	}
	return openDecoded(b, key)
}

// openDecoded is Open by decoding b whole: for a text not in jsonb's form.
func openDecoded(b []byte, key func(id string) ([]byte, bool)) []byte {
	v, err := decode(b)
	if err != nil {
		return b
	}
	changed := false
	v = walk(v, func(m map[string]any) (any, bool) {
		s, ok := sealedOf(m)
		if !ok {
			return nil, false
		}
		changed = true
		return json.RawMessage(openValue(s, key)), true
	})
	if !changed {
		return b
	}
	out, err := encode(v)
	if err != nil {
		return b
	}
	return out
}

// openValue is the plaintext of s, or Redacted.
func openValue(s sealedValue, key func(id string) ([]byte, bool)) []byte {
	k, ok := key(s.key)
	if !ok {
		return Redacted
	}
	plain, err := openBox(Key{ID: s.key, Key: k}, s.subject, s.box)
	if err != nil || !pgjson.Valid(plain) {
		return Redacted
	}
	return plain
}

// NewKey returns a fresh random data key.
func NewKey() []byte {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return k
}

// AEAD is AES-256-GCM under key.
func AEAD(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

func aad(subject, keyID string) []byte {
	return []byte(SealedKey + "\x00" + subject + "\x00" + keyID)
}

func sealBox(k Key, subject string, plain []byte) (string, error) {
	a, err := AEAD(k.Key)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(plain)+a.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(a.Seal(nonce, nonce, plain, aad(subject, k.ID))), nil
}

func openBox(k Key, subject, box string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(box)
	if err != nil {
		return nil, err
	}
	a, err := AEAD(k.Key)
	if err != nil {
		return nil, err
	}
	if len(raw) < a.NonceSize() {
		return nil, errors.New("short box")
	}
	return a.Open(nil, raw[:a.NonceSize()], raw[a.NonceSize():], aad(subject, k.ID))
}

// markerOf checks a marker's inner object and returns its subject.
func markerOf(inner any) (string, error) {
	m, ok := inner.(map[string]any)
	if !ok {
		return "", fmt.Errorf("%s must be an object with subject and value", MarkerKey)
	}
	s, ok := m["subject"].(string)
	if !ok {
		return "", fmt.Errorf("%s: subject must be a string", MarkerKey)
	}
	if err := CheckSubject(s); err != nil {
		return "", fmt.Errorf("%s: %w", MarkerKey, err)
	}
	if _, ok := m["value"]; !ok || len(m) != 2 {
		return "", fmt.Errorf("%s must have exactly subject and value", MarkerKey)
	}
	raw, err := json.Marshal(m["value"])
	if err != nil {
		return "", err
	}
	m["value"] = json.RawMessage(raw)
	return s, nil
}

type sealedValue struct{ subject, key, box string }

func sealedOf(m map[string]any) (sealedValue, bool) {
	inner, ok := m[SealedKey]
	if !ok || len(m) != 1 {
		return sealedValue{}, false
	}
	im, ok := inner.(map[string]any)
	if !ok {
		return sealedValue{}, false
	}
	var s sealedValue
	var ok1, ok2, ok3 bool
	s.subject, ok1 = im["subject"].(string)
	s.key, ok2 = im["key"].(string)
	s.box, ok3 = im["box"].(string)
	return s, ok1 && ok2 && ok3
}

// walk visits every object of v depth first (an object before its members);
// where f returns (r, true) the object is replaced by r and not entered.
func walk(v any, f func(map[string]any) (any, bool)) any {
	switch x := v.(type) {
	case map[string]any:
		if r, ok := f(x); ok {
			return r
		}
		for k, e := range x {
			x[k] = walk(e, f)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = walk(e, f)
		}
		return x
	}
	return v
}

func decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// encode is v's JSON in jsonb's form.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return pgjson.Normalize(bytes.TrimRight(buf.Bytes(), "\n"))
}

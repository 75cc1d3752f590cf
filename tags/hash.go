package tags

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
)

// Hash is a tag value that names value without carrying it: the
// HMAC-SHA256 of value under secret, in unpadded base64url (43 bytes).
// Tags stay in the log in clear forever (an erasure cannot reach them), so
// a tag must never carry personal data: tag by an opaque id, or by
// Hash(secret, email) when the natural key is personal. The same secret
// and value always give the same tag, so queries and conditions on it
// work; without the secret nobody can test a guess. Keep secret out of
// the database, with the key-encryption key (docs/LIFECYCLE.md, "Erasing
// a person's data").
//
//	t := tags.Must("email", tags.Hash(secret, "ada@example.com"))
func Hash(secret []byte, value string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(value))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

package tags_test

import (
	"fmt"

	"github.com/pgdcb/pgdcb/tags"
)

// A tag that names a person by e-mail without carrying the address.
func ExampleHash() {
	secret := []byte("kept-with-the-kek-not-in-the-db") // in production: 32 random bytes from a secret store
	t := tags.Must("email", tags.Hash(secret, "ada@example.com"))
	fmt.Println(t.Key(), len(t.Value()))
	// Output: email 43
}

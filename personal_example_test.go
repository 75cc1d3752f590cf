package pgdcb_test

import (
	"encoding/json"
	"fmt"

	"github.com/pgdcb/pgdcb"
)

// The marker Personal puts in an event's data; the store seals it at
// append and reads give "Ada Lovelace" back in its place (null once
// user-42 is erased).
func ExamplePersonal() {
	data, _ := json.Marshal(map[string]any{"wallet": "w1", "owner": pgdcb.Personal("user-42", "Ada Lovelace")})
	fmt.Println(string(data))
	// Output: {"owner":{"pgdcb.personal":{"subject":"user-42","value":"Ada Lovelace"}},"wallet":"w1"}
}

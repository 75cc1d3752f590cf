package seal

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/pgjson"
)

// Open's splice of a text in jsonb's form gives what decoding it whole
// gives, for subjects and values that need escapes, nested and repeated
// sealed values, erased keys; a text not in the form Seal writes falls
// back to decoding.
func TestOpenSpliceEqualsDecode(t *testing.T) {
	marker := func(subject string, v any) map[string]any {
		return map[string]any{MarkerKey: map[string]any{"subject": subject, "value": v}}
	}
	keys := map[string]Key{}
	for i, s := range []string{"u1", `we"ird\sub`, "ünï 🙂"} {
		keys[s] = Key{ID: fmt.Sprintf("00000000-0000-4000-8000-00000000000%d", i), Key: NewKey()}
	}
	docs := []any{
		marker("u1", "Ada"),
		map[string]any{"a": marker(`we"ird\sub`, map[string]any{"x": "<&>\n\"", "n": 1.50}), "b": []any{marker("ün\u00ef 🙂", 1e2), marker("u1", nil)}},
		map[string]any{"deep": map[string]any{"list": []any{1, marker("u1", []any{true, "x"})}}, "plain": "pgdcb.sealed"},
	}
	erased := map[string]bool{"": true, keys["u1"].ID: true}
	for i, d := range docs {
		raw, err := json.Marshal(d)
		require.NoError(t, err)
		sealed, err := Seal(raw, keys)
		require.NoError(t, err)
		sealed, err = pgjson.Normalize(sealed)
		require.NoError(t, err)
		for gone := range erased {
			key := func(id string) ([]byte, bool) {
				if id == gone {
					return nil, false
				}
				for _, k := range keys {
					if k.ID == id {
						return k.Key, true
					}
				}
				return nil, false
			}
			_, fast := scan(sealed)
			require.True(t, fast, "doc %d takes the splice", i)
			require.Equal(t, string(openDecoded(sealed, key)), string(Open(sealed, key)), "doc %d, erased %q", i, gone)
		}
	}
	// Not Seal's form (a key added): decoded, the value opened.
	odd := []byte(`{"a": {"pgdcb.sealed": {"box": "x", "key": "k", "subject": "s", "zzz": 1}}}`)
	_, fast := scan(odd)
	require.False(t, fast)
	require.Equal(t, `{"a": null}`, string(Open(odd, func(string) ([]byte, bool) { return nil, false })))
}

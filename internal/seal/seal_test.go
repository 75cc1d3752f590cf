package seal_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/seal"
)

// A value marked with pgdcb.Personal is sealed (its plaintext nowhere in
// the sealed text), opens back to the value in jsonb's form, and opens to
// null without its key; other subjects' values and plain fields are kept.
func TestSealOpenRedact(t *testing.T) {
	data, err := json.Marshal(map[string]any{
		"plain": "<kept>",
		"a":     pgdcb.Personal("u1", map[string]any{"name": "Ada <a@x>", "n": 1e2}),
		"list":  []any{pgdcb.Personal("u2", "Bob")},
	})
	require.NoError(t, err)
	subs, err := seal.Subjects(data)
	require.NoError(t, err)
	require.Equal(t, []string{"u1", "u2"}, subs)
	keys := map[string]seal.Key{
		"u1": {ID: "k1", Key: seal.NewKey()},
		"u2": {ID: "k2", Key: seal.NewKey()},
	}
	sealed, err := seal.Seal(data, keys)
	require.NoError(t, err)
	require.NotContains(t, string(sealed), "Ada")
	require.NotContains(t, string(sealed), "Bob")
	require.False(t, seal.Marked(sealed))
	require.Equal(t, []string{"k1", "k2"}, seal.KeyIDs(sealed))

	all := func(id string) ([]byte, bool) {
		for _, k := range keys {
			if k.ID == id {
				return k.Key, true
			}
		}
		return nil, false
	}
	require.Equal(t, `{"a": {"n": 100, "name": "Ada <a@x>"}, "list": ["Bob"], "plain": "<kept>"}`, string(seal.Open(sealed, all)))
	onlyU2 := func(id string) ([]byte, bool) {
		if id == "k2" {
			return keys["u2"].Key, true
		}
		return nil, false
	}
	require.Equal(t, `{"a": null, "list": ["Bob"], "plain": "<kept>"}`, string(seal.Open(sealed, onlyU2)))

	// A key of another subject, or a tampered box, does not open it.
	swapped := strings.Replace(string(sealed), `"k1"`, `"k2"`, 1)
	require.Contains(t, string(seal.Open([]byte(swapped), all)), `"a": null`)

	// A whole payload.
	whole, err := json.Marshal(pgdcb.Personal("u1", "x"))
	require.NoError(t, err)
	sw, err := seal.Seal(whole, keys)
	require.NoError(t, err)
	require.Equal(t, `"x"`, string(seal.Open(sw, all)))
	require.Equal(t, `null`, string(seal.Open(sw, onlyU2)))
}

func TestMalformedMarkers(t *testing.T) {
	for _, b := range []string{
		`{"pgdcb.personal": 1}`,
		`{"pgdcb.personal": {"subject": "", "value": 1}}`,
		`{"pgdcb.personal": {"subject": "u", "value": 1, "x": 2}}`,
		`{"pgdcb.personal": {"subject": 5, "value": 1}}`,
		`{"pgdcb.personal": {"subject": "u"}}`,
	} {
		_, err := seal.Subjects([]byte(b))
		require.Error(t, err, b)
	}
}

package pgdcb

import "encoding/json"

// Personal marks value as personal data of subject, for an event's Data (or
// Metadata): put it where the value goes, or make it the whole payload.
//
//	data := map[string]any{"wallet": "w1", "owner": pgdcb.Personal("user-42", "Ada Lovelace")}
//	ev := pgdcb.MustEvent("WalletOpened", data, "wallet=w1")
//
// It marshals to {"pgdcb.personal": {"subject": …, "value": …}}. At append
// the store seals value under subject's data key (AES-256-GCM) and stores
// only the ciphertext; reads give value back in its place, as if it had
// never been marked (the marker is a write-side envelope). After the
// store's Erase(subject), reads give JSON null in its place. The subject id
// stays in the log in clear: use an opaque id (a user's UUID), never a name
// or an e-mail address; 1..256 bytes of UTF-8 without NUL.
// docs/LIFECYCLE.md, "Erasing a person's data".
func Personal(subject string, value any) json.Marshaler {
	return personal{subject, value}
}

type personal struct {
	subject string
	value   any
}

func (p personal) MarshalJSON() ([]byte, error) {
	v, err := json.Marshal(p.value)
	if err != nil {
		return nil, err
	}
	// internal/seal.MarkerKey (which imports nothing of the root).
	return json.Marshal(map[string]any{"pgdcb.personal": map[string]any{"subject": p.subject, "value": json.RawMessage(v)}})
}

// ErasedEventType is the type of the event Erase appends: tagged
// "pgdcb.subject=<subject>", its data {"subject": "<subject>"}. Projections
// and read models that keep personal data of their own drop the subject's
// when they meet it.
const ErasedEventType = "pgdcb.erased"

package main

import (
	"flag"
	"fmt"
)

var eraseCmd = &command{
	name: "erase", args: "-subject ID", summary: "forget a subject: destroy its data key (crypto-shredding)",
	detail: `Runs Store.Erase: in one transaction, appends a pgdcb.erased event tagged
pgdcb.subject=ID and deletes the subject's data key (and the decision
snapshots that may have folded its fields). From then on every read gives
null for the fields sealed for ID (pgdcb.Personal); events, tags and
positions stay. It cannot be undone. Run it as the schema's owner. The CLI
holds no key-encryption key: read and export show sealed fields as stored
({"pgdcb.sealed": ...}, ciphertext), before and after an erasure.
`,
	flags: func(fs *flag.FlagSet) func(e *env) error {
		subject := fs.String("subject", "", "the subject id to erase (required)")
		return func(e *env) error {
			if *subject == "" {
				return usagef("-subject is required")
			}
			store, err := e.store()
			if err != nil {
				return err
			}
			res, err := store.Erase(e.ctx, *subject)
			if err != nil {
				return err
			}
			if e.json {
				return e.writeJSON(map[string]any{"subject": *subject, "transaction_id": res.TransactionID, "position": res.Positions[0]})
			}
			_, err = fmt.Fprintf(e.stdout, "subject %q erased: its data key is destroyed; event pgdcb.erased at position %d (transaction %d)\n",
				*subject, res.Positions[0], res.TransactionID)
			return err
		}
	},
}

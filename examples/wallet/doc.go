// Package wallet is the pgdcb reference application: wallets with deposits,
// withdrawals and transfers, written the way we want users to write theirs.
//
// Every wallet event is tagged wallet=<id>; a wallet's decision state is the
// fold of the events carrying its tag. A transfer is ONE decision over both
// wallets (two models projected in one read, one conditional append over the
// union of their tags): no saga, no aggregate lock, and it cannot overdraw the
// source even when many transfers race. Commands run through commands.Executor,
// which re-decides on conflicts and makes caller-supplied command ids
// idempotent.
//
// The HTTP API (NewAPI) returns a wallet's decision cursor as its ETag and
// accepts it back with If-Match (RFC 9110): the command fails with 412 if
// anything about that wallet changed since. Idempotency-Key follows the IETF
// draft: a retry of the same request replays the first outcome, the same key
// with another request is 422, a retry while the first runs is 409. The
// Balances read model is a table maintained by tailing the log
// (eventstore.Store.ReadTail) with its checkpoint in the same transaction as
// the balances.
//
// # Trying it
//
// Command walletd (examples/wallet/cmd/walletd) serves the API; it migrates
// its schema at start and stops cleanly on SIGINT or SIGTERM. A session
// (headers trimmed to the ones that matter; H='Content-Type: application/json',
// KEY=0190f5b2-8d3c-7cde-9a41-3f1e2d4c5b6a):
//
//	$ PGDCB_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres go run ./examples/wallet/cmd/walletd -addr :8080
//	level=INFO msg="walletd listening" addr=http://[::]:8080 schema=wallet postgres=env migrations_applied=3
//
//	$ curl -si localhost:8080/wallets -H "$H" -d '{"wallet_id":"alice"}'
//	HTTP/1.1 201 Created
//	Location: /wallets/alice
//	{"wallet_id":"alice","balance":0,"command_id":"01a20ee6-a1cd-71f5-ac4b-86766bfd75e7","transaction_id":215294}
//	$ curl -si localhost:8080/wallets -H "$H" -d '{"wallet_id":"bob"}'
//	HTTP/1.1 201 Created
//
//	$ curl -si localhost:8080/wallets/alice/deposits -H "$H" -H "Idempotency-Key: $KEY" -d '{"amount":100}'
//	HTTP/1.1 200 OK
//	{"wallet_id":"alice","balance":100,"command_id":"0190f5b2-8d3c-7cde-9a41-3f1e2d4c5b6a","transaction_id":215300}
//	$ curl -si localhost:8080/wallets/alice/deposits -H "$H" -H "Idempotency-Key: $KEY" -d '{"amount":100}'
//	HTTP/1.1 200 OK
//	Idempotent-Replayed: true
//	{"wallet_id":"alice","balance":100,"command_id":"0190f5b2-8d3c-7cde-9a41-3f1e2d4c5b6a","transaction_id":215300}
//	$ curl -si localhost:8080/wallets/alice/deposits -H "$H" -H "Idempotency-Key: $KEY" -d '{"amount":999}'
//	HTTP/1.1 422 Unprocessable Entity
//	{"error":"wallet: idempotency key already used for a different request (by a Deposit command)","code":"idempotency_key_reused"}
//
//	$ curl -si localhost:8080/wallets/alice/withdrawals -H "$H" -d '{"amount":10}'
//	HTTP/1.1 200 OK
//	{"wallet_id":"alice","balance":90,"command_id":"01a20ee6-a2fd-7b77-bdfe-80df85d400da","transaction_id":215304}
//	$ curl -si localhost:8080/transfers -H "$H" -d '{"from":"alice","to":"bob","amount":40}'
//	HTTP/1.1 200 OK
//	{"from":"alice","to":"bob","amount":40,"from_balance":50,"to_balance":40,"transfer_id":"01a20ee6-a328-7e61-8a18-4755bff1478d","transaction_id":215307}
//
//	$ curl -si localhost:8080/wallets/alice
//	HTTP/1.1 200 OK
//	Etag: "AQGLkg0G878NAAA"
//	{"wallet_id":"alice","balance":50,"as_of":"AQGLkg0G878NAAA"}
//	$ ETAG='"AQGLkg0G878NAAA"'
//	$ curl -si localhost:8080/wallets/alice/withdrawals -H "$H" -H "If-Match: $ETAG" -d '{"amount":5}'
//	HTTP/1.1 200 OK
//	{"wallet_id":"alice","balance":45,"command_id":"01a20eeb-72cf-7c2c-92db-d6d9de8d16aa","transaction_id":221178}
//	$ curl -si localhost:8080/wallets/alice/withdrawals -H "$H" -H "If-Match: $ETAG" -d '{"amount":5}'
//	HTTP/1.1 412 Precondition Failed
//	{"error":"wallet: wallet changed since the given cursor","code":"stale_etag"}
//	$ curl -si localhost:8080/wallets/alice/withdrawals -H "$H" -H "If-Match: W/$ETAG" -d '{"amount":5}'
//	HTTP/1.1 412 Precondition Failed
//	{"error":"wallet: wallet changed since the given cursor","code":"stale_etag"}
//	$ curl -si localhost:8080/wallets/alice/withdrawals -H "$H" -H 'If-Match: not-quoted' -d '{"amount":5}'
//	HTTP/1.1 400 Bad Request
//	{"error":"malformed If-Match: entity-tag at byte 0 does not start with a double quote","code":"bad_etag"}
//
//	$ curl -si localhost:8080/balances/bob
//	HTTP/1.1 200 OK
//	{"wallet_id":"bob","balance":40,"as_of":"AQD9vw3__________38"}
//
//	$ curl -si localhost:8080/wallets/alice/withdrawals -H "$H" -d '{"amount":1000}'
//	HTTP/1.1 409 Conflict
//	{"error":"wallet: insufficient funds","code":"insufficient_funds"}
//	$ curl -si localhost:8080/transfers -H "$H" -d '{"from":"alice","to":"carol","amount":1}'
//	HTTP/1.1 404 Not Found
//	{"error":"wallet: unknown wallet: carol","code":"wallet_not_found"}
//	$ curl -si localhost:8080/wallets -H "$H" -d '{"wallet_id":"alice"}'
//	HTTP/1.1 409 Conflict
//	{"error":"wallet: wallet already exists","code":"wallet_exists"}
//	$ curl -si localhost:8080/wallets/alice/deposits -H 'Content-Type: text/plain' -d '{"amount":1}'
//	HTTP/1.1 415 Unsupported Media Type
//	{"error":"request body must be Content-Type: application/json (got \"text/plain\")","code":"unsupported_media_type"}
//	$ curl -si localhost:8080/wallets/alice/deposits -H "$H" -d '{"amount":-1}'
//	HTTP/1.1 400 Bad Request
//	{"error":"wallet: amount must be a positive integer","code":"invalid_amount"}
//	$ curl -si -X DELETE localhost:8080/wallets/alice
//	HTTP/1.1 405 Method Not Allowed
//	Allow: GET, HEAD
//	{"error":"method DELETE not allowed on /wallets/alice (allowed: GET, HEAD)","code":"method_not_allowed"}
//	$ curl -si localhost:8080/accounts
//	HTTP/1.1 404 Not Found
//	{"error":"no such route: GET /accounts","code":"not_found"}
//
//	$ kill -TERM %1
//	level=INFO msg="walletd shutting down" timeout=10s
//	level=INFO msg="walletd stopped"
//
// Two answers cannot be provoked with curl alone: 409
// idempotency_key_in_flight (a retry with the key of a request still running,
// on any instance) and 503 outcome_unknown with Retry-After (the connection
// was lost around the commit: retry with the same Idempotency-Key to apply
// the command once or get its outcome).
package wallet

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
// The HTTP API (NewAPI) answers GET /wallets/{id} with the wallet's version
// (the cursor of its last event) as a strong ETag, 304 to an If-None-Match
// naming it, and accepts it back with If-Match (RFC 9110): a command fails
// with 412 if the wallet changed since. Idempotency-Key follows the IETF
// draft: 1..MaxIdempotencyKeyBytes (255) bytes of printable ASCII, bare (no
// spaces or commas) or as a quoted string ("two words", with \" and \\
// escapes). A retry of the same request replays the first outcome, a
// business rejection included; the same key with another request is 422; a
// retry while the first runs is 409. A key is kept IdempotencyKeyLifetime
// (24 hours) from its first use; after that it is a new request. Errors are
// RFC 9457 problem details with a stable code. The Balances read model is a table
// maintained by a projection (projection.Runner) with its checkpoint in the
// same transaction as the balances. GET /balances/{id} reads your writes: it
// answers once the read model holds every event of the wallet committed
// before the request (projection.Runner.WaitFor on the wallet's last event),
// or 503 read_model_behind after BalancesConfig.ReadWait; the demo checks it
// after every committed transfer.
//
// # Trying it
//
// Command walletd (examples/wallet/cmd/walletd) serves the API; it migrates
// its schema at start and stops cleanly on SIGINT or SIGTERM. A session
// (headers trimmed to the ones that matter; H='Content-Type: application/json'):
//
//	$ PGDCB_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres go run ./examples/wallet/cmd/walletd -addr :8080
//	level=INFO msg="walletd listening" addr=http://[::]:8080 schema=wallet postgres=env migrations_applied=10
//
//	$ curl -si localhost:8080/wallets -H "$H" -d '{"wallet_id":"alice"}'
//	HTTP/1.1 201 Created
//	Location: /wallets/alice
//	{"wallet_id":"alice","balance":0,"command_id":"01a2142a-30be-76f0-81cc-afc74a0bdeb1","transaction_id":31977}
//	$ curl -si localhost:8080/wallets -H "$H" -d '{"wallet_id":"bob"}'
//	HTTP/1.1 201 Created
//
//	$ curl -si localhost:8080/wallets/alice/deposits -H "$H" -H "Idempotency-Key: deposit-0001" -d '{"amount":100}'
//	HTTP/1.1 200 OK
//	{"wallet_id":"alice","balance":100,"command_id":"1addcb40-ce9d-56ac-a562-9ca91ff31ca4","transaction_id":31987}
//	$ curl -si localhost:8080/wallets/alice/deposits -H "$H" -H "Idempotency-Key: deposit-0001" -d '{"amount":100}'
//	HTTP/1.1 200 OK
//	Idempotent-Replayed: true
//	{"wallet_id":"alice","balance":100,"command_id":"1addcb40-ce9d-56ac-a562-9ca91ff31ca4","transaction_id":31987}
//	$ curl -si localhost:8080/wallets/alice/deposits -H "$H" -H "Idempotency-Key: deposit-0001" -d '{"amount":999}'
//	HTTP/1.1 422 Unprocessable Entity
//	Content-Type: application/problem+json
//	{"type":"tag:pgdcb.github.io,2026:wallet/idempotency_key_reused","title":"Idempotency-Key reused","status":422,"detail":"wallet: idempotency key already used for a different request (by a Deposit command)","code":"idempotency_key_reused"}
//
//	$ curl -si localhost:8080/wallets/alice/withdrawals -H "$H" -H "Idempotency-Key: withdraw-0001" -d '{"amount":1000}'
//	HTTP/1.1 409 Conflict
//	{"type":"tag:pgdcb.github.io,2026:wallet/insufficient_funds","title":"Insufficient funds","status":409,"detail":"wallet: insufficient funds","code":"insufficient_funds"}
//	$ curl -si localhost:8080/wallets/alice/deposits -H "$H" -d '{"amount":1000}'
//	HTTP/1.1 200 OK
//	{"wallet_id":"alice","balance":1100,"command_id":"01a2142a-3277-7771-8cda-73c3ce528c1a","transaction_id":31992}
//	$ curl -si localhost:8080/wallets/alice/withdrawals -H "$H" -H "Idempotency-Key: withdraw-0001" -d '{"amount":1000}'
//	HTTP/1.1 409 Conflict
//	Idempotent-Replayed: true
//	{"type":"tag:pgdcb.github.io,2026:wallet/insufficient_funds","title":"Insufficient funds","status":409,"detail":"wallet: insufficient funds","code":"insufficient_funds"}
//
//	$ curl -si localhost:8080/wallets/alice/withdrawals -H "$H" -d '{"amount":10}'
//	HTTP/1.1 200 OK
//	{"wallet_id":"alice","balance":1090,"command_id":"01a2142a-32dc-7079-8af8-3aa1ad23ebec","transaction_id":31998}
//	$ curl -si localhost:8080/transfers -H "$H" -d '{"from":"alice","to":"bob","amount":40}'
//	HTTP/1.1 200 OK
//	{"from":"alice","to":"bob","amount":40,"from_balance":1050,"to_balance":40,"transfer_id":"01a2142a-3313-7127-86b1-ad80e76321fd","transaction_id":32002}
//
//	$ curl -si localhost:8080/wallets/alice
//	HTTP/1.1 200 OK
//	Etag: "AQCC-gEH"
//	{"wallet_id":"alice","balance":1050,"as_of":"AQCC-gEH"}
//	$ ETAG='"AQCC-gEH"'
//	$ curl -si localhost:8080/wallets/bob/deposits -H "$H" -d '{"amount":5}'
//	HTTP/1.1 200 OK
//	$ curl -si localhost:8080/wallets/alice -H "If-None-Match: $ETAG"
//	HTTP/1.1 304 Not Modified
//	Etag: "AQCC-gEH"
//	$ curl -si localhost:8080/wallets/alice/withdrawals -H "$H" -H "If-Match: $ETAG" -d '{"amount":5}'
//	HTTP/1.1 200 OK
//	{"wallet_id":"alice","balance":1045,"command_id":"01a2142a-4ad0-723b-929e-f8c45bd46051","transaction_id":32047}
//	$ curl -si localhost:8080/wallets/alice/withdrawals -H "$H" -H "If-Match: $ETAG" -d '{"amount":5}'
//	HTTP/1.1 412 Precondition Failed
//	{"type":"tag:pgdcb.github.io,2026:wallet/stale_etag","title":"Wallet changed","status":412,"detail":"wallet: the wallet changed since the given version (ETag)","code":"stale_etag"}
//	$ curl -si localhost:8080/wallets/alice/withdrawals -H "$H" -H "If-Match: W/$ETAG" -d '{"amount":5}'
//	HTTP/1.1 412 Precondition Failed
//	{"type":"tag:pgdcb.github.io,2026:wallet/stale_etag","title":"Wallet changed","status":412,"detail":"wallet: the wallet changed since the given version (ETag)","code":"stale_etag"}
//	$ curl -si localhost:8080/wallets/alice/withdrawals -H "$H" -H 'If-Match: not-quoted' -d '{"amount":5}'
//	HTTP/1.1 400 Bad Request
//	{"type":"tag:pgdcb.github.io,2026:wallet/bad_etag","title":"Malformed entity-tag","status":400,"detail":"malformed If-Match: entity-tag at byte 0 does not start with a double quote","code":"bad_etag"}
//
//	$ curl -si localhost:8080/balances/bob
//	HTTP/1.1 200 OK
//	Etag: W/"AQCC-gEI"
//	{"wallet_id":"bob","balance":40,"as_of":"AQCC-gEI"}
//
//	$ curl -si localhost:8080/transfers -H "$H" -d '{"from":"alice","to":"carol","amount":1}'
//	HTTP/1.1 404 Not Found
//	{"type":"tag:pgdcb.github.io,2026:wallet/wallet_not_found","title":"Wallet not found","status":404,"detail":"wallet: unknown wallet: carol","code":"wallet_not_found"}
//	$ curl -si localhost:8080/wallets -H "$H" -d '{"wallet_id":"alice"}'
//	HTTP/1.1 409 Conflict
//	{"type":"tag:pgdcb.github.io,2026:wallet/wallet_exists","title":"Wallet already exists","status":409,"detail":"wallet: wallet already exists","code":"wallet_exists"}
//	$ curl -si localhost:8080/wallets/alice/deposits -H 'Content-Type: text/plain' -d '{"amount":1}'
//	HTTP/1.1 415 Unsupported Media Type
//	{"type":"tag:pgdcb.github.io,2026:wallet/unsupported_media_type","title":"Unsupported media type","status":415,"detail":"request body must be Content-Type: application/json (got \"text/plain\")","code":"unsupported_media_type"}
//	$ curl -si localhost:8080/wallets/alice/deposits -H "$H" -d '{"amount":"10"}'
//	HTTP/1.1 400 Bad Request
//	{"type":"tag:pgdcb.github.io,2026:wallet/bad_json","title":"Malformed request body","status":400,"detail":"field \"amount\" must be an integer in range (got string)","code":"bad_json"}
//	$ curl -si localhost:8080/wallets/alice/deposits -H "$H" -d '{"amount":-1}'
//	HTTP/1.1 400 Bad Request
//	{"type":"tag:pgdcb.github.io,2026:wallet/invalid_amount","title":"Invalid amount","status":400,"detail":"wallet: amount must be a positive integer","code":"invalid_amount"}
//	$ curl -si -X DELETE localhost:8080/wallets/alice
//	HTTP/1.1 405 Method Not Allowed
//	Allow: GET, HEAD
//	{"type":"tag:pgdcb.github.io,2026:wallet/method_not_allowed","title":"Method not allowed","status":405,"detail":"method DELETE not allowed on /wallets/alice (allowed: GET, HEAD)","code":"method_not_allowed"}
//	$ curl -si localhost:8080/accounts
//	HTTP/1.1 404 Not Found
//	{"type":"tag:pgdcb.github.io,2026:wallet/not_found","title":"No such route","status":404,"detail":"no such route: GET /accounts","code":"not_found"}
//
//	$ kill -TERM %1
//	level=INFO msg="walletd shutting down" timeout=10s
//	level=INFO msg="walletd stopped"
//
// 409 idempotency_key_in_flight answers a request whose key a request still
// running holds, on any instance: send a few at once to see it (one is
// applied, the others get 409, or a replay once it is done):
//
//	$ for i in 1 2 3 4; do curl -s localhost:8080/wallets/alice/deposits -H "$H" -H "Idempotency-Key: k1" -d '{"amount":1}' & done; wait
//
// One answer cannot be provoked with curl alone: 503 outcome_unknown with
// Retry-After (the connection was lost around the commit: retry with the same
// Idempotency-Key to apply the command once or get its outcome).
//
// walletd logs one line per request: method, path, status and duration.
package wallet

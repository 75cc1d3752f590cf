// Package jspublisher is the outbox's publisher for NATS JetStream, in a
// module of its own so that only its importers download the NATS client:
//
//	go get github.com/pgdcb/pgdcb/outbox/jspublisher
//
//	pub, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: "orders"})
//	relay, err := outbox.New(store, topic, "nats", pub, nil)
//
// Each message carries Nats-Msg-Id = Message.ID, so the stream drops
// redeliveries within its Duplicates window, and the publisher reconciles
// with the stream before a batch that may have been delivered already
// (after a start, a failure, a reconnect, a new relay leader): it reads the
// last message of each subject and skips what the stream holds. It rides out
// a broker restart within one Publish call. docs/OUTBOX.md describes the
// guarantee.
package jspublisher

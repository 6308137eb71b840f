// Package wire converts between Kafka's bytes and kfollower's domain types:
// kmsg requests and responses to and from the follower package's small value
// types. The record-batch v2 format itself lives in the pure subpackage
// wire/batch, shared with storage.
//
// May import: kmsg, kerr, and follower types.
package wire

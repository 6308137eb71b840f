// Package kfollower holds no code. It names the module's layout, and its
// test, layers_test.go, holds every package to the imports its layer allows.
//
// kfollower follows an Apache Kafka cluster from the outside as a shadow
// replica: it fetches as a consumer, copies record batches byte for byte into
// a local Kafka-format log, reconciles by KIP-101/KIP-279 after a leader
// change, and reports any committed data the cluster lost. See README.md and
// docs/design.md.
//
// The packages, from the bottom up; each imports only packages on lines
// below it (and the standard library and franz-go where its row says so):
//
//	cmd/kfollower  the command: flags, config, signals, wiring, HTTP
//	metrics        Prometheus collectors (may see fetcher's typed observations)
//	lostfound      lost list and replay: lost+found, produced again (writes)
//	audit          verify and lineage against a cluster (only reads)
//	cluster        the tools' one-shot requests to a cluster (Metadata, Fetch, ...)
//	fetcher        the I/O driver: one goroutine per leader broker
//	wire           Kafka requests and answers: kmsg ⇄ wire's small structs
//	follower       the per-partition state machine (pure: no I/O, no clock)
//	storage        the Kafka-format log: segments, indexes, epochs, recovery
//	wire/batch     the record-batch v2 format (pure)
//
// internal/testcert makes test certificates (a CA, server and client
// certificates, as tls and PEM) and is imported by tests alone.
//
// follower and storage sit side by side and never import each other: storage
// satisfies follower's read-only view of a log. wire never imports follower:
// the fetcher maps one to the other. audit never imports follower, fetcher
// or lostfound, and never writes. integration/... and bench are tests against real Kafka and may
// import anything.
package kfollower

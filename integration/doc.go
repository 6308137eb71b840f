// Package integration holds kfollower's end-to-end tests against real Apache
// Kafka 4.x brokers in KRaft mode, started by the harness in
// integration/kafka from jars resolved from Maven Central.
//
// May import: anything.
package integration

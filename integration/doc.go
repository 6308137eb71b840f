// Package integration holds kfollower's end-to-end tests against real Apache
// Kafka brokers in KRaft mode (3.9 and 4.x, KAFKA_VERSION), started by the
// harness in integration/kafka from jars resolved from Maven Central.
//
// May import: anything.
package integration

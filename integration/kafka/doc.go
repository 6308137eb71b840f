// Package kafka runs a real Apache Kafka 4.x cluster in KRaft mode on loopback
// for tests anywhere in the repository.
//
// The jars come from Maven Central through the checked-in pom.xml (Kafka at
// KAFKA_VERSION, default DefaultVersion, plus log4j2 and its SLF4J 1.x
// binding, which the kafka_2.13 POM lacks) and are cached outside the work
// tree. Nodes are plain JVMs, `java -cp '<lib>/*' kafka.Kafka node.properties`,
// each in its own process group, formatted with kafka.tools.StorageTool: no
// tarball, no Docker. Recipes and the Kafka source behind every setting are in
// ../shared/reference/kafka-harness.md.
//
// Two layouts: three combined broker+controller nodes (Combined), and one
// controller-only node plus three brokers (Isolated), needed whenever two
// brokers must be down at once (an unclean election).
//
// A test that needs Kafka and cannot start it fails with a message naming what
// is missing; it never skips. Tests that need only a cluster, no fault control,
// run against an external one when KFOLLOWER_KAFKA_BOOTSTRAP is set (for
// example the docker-compose cluster).
//
// Teardown never leaks a JVM: t.Cleanup kills each process group, Main (for
// TestMain) kills whatever is left, and every JVM gets SIGKILL from the kernel
// when the test process dies (Pdeathsig).
//
// May import: anything (franz-go kgo, kadm, kmsg).
package kafka

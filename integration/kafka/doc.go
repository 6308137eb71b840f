// Package kafka runs a real Apache Kafka cluster in KRaft mode on loopback
// for tests anywhere in the repository: any release line of Releases (3.9
// and 4.0 to 4.4), chosen by KAFKA_VERSION (default DefaultVersion).
//
// The jars come from Maven Central through the checked-in pom.xml (Kafka at
// that version, plus, for 4.x, log4j2 and its SLF4J 1.x binding, which the
// kafka_2.13 POM lacks) and are cached outside the work tree. Nodes are
// plain JVMs, `java -cp '<lib>/*' kafka.Kafka node.properties`, each in its
// own process group, formatted with StorageTool (once per cluster shape,
// then copied: formatcache.go): no tarball, no Docker. Main
// classes are looked up in the resolved jars (release.go), as tools move
// between modules across lines. Recipes and the Kafka source behind every
// setting are in docs/testing.md §6; what differs by release line, in
// docs/kafka-versions.md.
//
// Two layouts: three combined broker+controller nodes (Combined), and one
// controller-only node plus three brokers (Isolated), needed whenever two
// brokers must be down at once (an unclean election). Either can have
// broker-only nodes added that start empty (Options.ExtraBrokers), to
// reassign partitions onto a new broker (reassign.go).
//
// A test that needs Kafka and cannot start it fails with a message naming what
// is missing; it never skips. Tests that need only a cluster, no fault control,
// run against an external one when KFOLLOWER_KAFKA_BOOTSTRAP is set (for
// example the docker-compose cluster).
//
// Teardown never leaks a JVM: t.Cleanup kills each process group, Main (for
// TestMain) kills whatever is left, and every JVM (brokers, the storage
// format step and the command-line tools alike) gets SIGKILL from the kernel
// when the test process dies (Pdeathsig), even killed by its -timeout.
//
// May import: anything (franz-go kgo, kadm, kmsg).
package kafka

#!/bin/bash
# kafka-run-class.sh CLASS ARGS...: runs a Kafka main class on the image's jars,
# honouring the tarball script's variables (KAFKA_HEAP_OPTS, KAFKA_OPTS, ...).
# Defaults are small and quick to start: tools are short-lived JVMs.
exec java ${KAFKA_HEAP_OPTS:--Xmx256m} \
  ${KAFKA_JVM_PERFORMANCE_OPTS:--XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true} \
  ${KAFKA_LOG4J_OPTS:--Dlog4j2.level=WARN} ${KAFKA_OPTS:-} -cp '/opt/kafka/libs/*' "$@"

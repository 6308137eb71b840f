// Package judges finds the outside Kafka clients that kfollower's serving
// tests read through, installing them on first use: kcat (Debian) and
// confluent-kafka for Python (PyPI, with its bundled librdkafka). None of them
// was written here, so they judge the server by what real clients send and
// expect. The Java tools come from the Kafka jars the harness resolves
// (integration/kafka). A test that needs a judge and cannot get one fails; it
// never skips.
package judges

// Package compose tests docker-compose.yml for real: kfollower's container
// following the compose cluster, a broker container killed and restarted,
// Prometheus scraping kfollower with the example alerts loaded, the Grafana
// dashboard's queries, and kfollower stopped and started on its volume.
//
// The tests that need the compose project carry the build tag "compose" and
// run only from integration/compose/run (make test-compose), which starts a
// docker daemon of its own, builds the images, brings the project up and
// tears it all down afterwards; `make test` runs only the dashboard's static
// checks here.
package compose

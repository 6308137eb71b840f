// Package bench holds kfollower's benchmarks against a real local Kafka
// cluster. Each reports its figures as ratios to a reference measured in the
// same run (a franz-go consumer reading the same data, or a broker replica
// copying it), never as absolute timings to assert on. Run them with bench/run.sh; `make test` compiles
// but does not run them.
package bench

#!/usr/bin/env bash
# Runs kfollower's benchmarks against a real local Kafka cluster (started by
# the test harness) and prints their figures. Each benchmark runs once
# (-benchtime 1x): one iteration copies about 1 GiB.
#   bench/run.sh               all benchmarks
#   bench/run.sh CatchUp       one of them
#   bench/run.sh Replica       the kfollower binary (three flush policies, and
#                              os on franz-go's connections)
#                              against a broker replica and a consumer
#   bench/run.sh Serve -cpuprofile serve.cpu
#                              one of them, with more `go test` flags
set -euo pipefail
cd "$(dirname "$0")/.."
go test -run '^$' -bench "${1:-.}" -benchtime 1x -timeout 120m -v "${@:2}" ./bench/

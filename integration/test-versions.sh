#!/usr/bin/env bash
# make test-versions: the Kafka release lines besides the default one, which
# `make test` runs whole. KAFKA_SUBSET lines run VERSION_TESTS
# (reconciliation, unclean election, crash, audit, the DumpLogSegments judge
# and the brokers' API versions), KAFKA_SERVE lines SERVE_TESTS as well.
# KAFKA_FULL lines (none by default: it kept CI under 40 minutes) run every
# test that starts Kafka but FULL_SKIP, whose broker side is the same on
# every line (the demo's story, the served endpoint's security and limits,
# groups with the cluster stopped).
# One line at a time: the harness runs one cluster at a time on a machine.
# Each line's output is headed by its version, and a summary gives each
# line's result and time.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
KAFKA_FULL=${KAFKA_FULL:-}
KAFKA_SUBSET=${KAFKA_SUBSET:-4.0.2 4.1.2 4.2.2 4.3.1 3.9.2}
# KAFKA_SERVE lines also run SERVE_TESTS: the served copy read by the
# Java tools of that line, groups forwarded to its coordinators, the
# differential test against its leader, transactions, KIP-320. 4.0 is the
# oldest 4.x line (KIP-896's minimum versions).
KAFKA_SERVE=${KAFKA_SERVE:-4.0.2}
SERVE_TESTS=${SERVE_TESTS:-'TestServe|TestServeJudges|TestServeJudgesReadCommitted|TestServeGroups|TestDifferential|TestTransactionsServed|TestKIP320ThroughKfollower'}
VERSION_TESTS=${VERSION_TESTS:-'^(TestUncleanElectionLoss|TestReconcileTwoRoundtrips|TestKilledDuringCatchUp|TestAuditAfterUncleanElection|TestFindClassInResolvedJars|TestDumpLogJudgeRealTool|TestAPIVersions)$'}
FULL_SKIP=${FULL_SKIP:-'^(TestDemoStory|TestDemoInterrupt|TestServeSecurity|TestServeGroupsUpstreamDown)$'}
PKGS=(./integration/... ./cmd/kfollower/)

summary=() passed=0 failed=0 began=$(date +%s)
for v in $KAFKA_FULL $KAFKA_SUBSET; do
  what="reconciliation, unclean election, crash, audit" run=(-run "$VERSION_TESTS")
  if [[ " $KAFKA_SERVE " == *" $v "* ]]; then
    what="$what, serving" run=(-run "${VERSION_TESTS%)\$}|$SERVE_TESTS)\$")
  fi
  if [[ " $KAFKA_FULL " == *" $v "* ]]; then what="every test that starts Kafka but the demo's, security's and a stopped cluster's" run=(-skip "$FULL_SKIP"); fi
  echo "==== Kafka $v: $what ===="
  start=$(date +%s)
  # -v for each test's result and time; the RUN lines only repeat names.
  if KAFKA_VERSION=$v "$GO" test -count=1 -timeout 60m -v "${run[@]}" "${PKGS[@]}" 2>&1 | grep -vE '^=== (RUN|PAUSE|CONT|NAME)'; then
    r=ok passed=$((passed + 1))
  else
    r=FAILED failed=$((failed + 1))
  fi
  line="Kafka $v ($what): $r in $(($(date +%s) - start))s"
  echo "==== $line ===="
  summary+=("$line")
done
echo "==== Kafka version matrix, $(($(date +%s) - began))s ===="
printf '%s\n' "${summary[@]}"
echo "versions: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

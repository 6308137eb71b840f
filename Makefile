# kfollower. `make test` is the project's test command (README, .ci/run).
GO          ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS        := ./...
# Packages that start real Kafka brokers.
INTEGRATION := ./integration/...

.PHONY: test test-unit test-integration test-versions lint fmt build demo

build:
	$(GO) build ./...

# Everything, real Kafka included. Needs Go, Java 17 and Maven.
test:
	$(GO) test -count=1 -timeout 30m $(PKGS)

# No JVM: every package but the integration ones, and not cmd/kfollower's
# end-to-end TestDaemon (which starts a cluster).
test-unit:
	$(GO) test -count=1 -timeout 10m -skip '^TestDaemon$$' $$($(GO) list $(PKGS) | grep -v /integration)

test-integration:
	$(GO) test -count=1 -timeout 30m -v $(INTEGRATION)

# Kafka release lines besides the default (4.4.0, which `make test` runs):
# the whole Kafka-starting suite on the oldest 4.x, and the reconciliation,
# unclean-election, crash and audit tests on every other line, 3.9 (KRaft)
# included. One line at a time (one harness cluster at a time on 2 cores),
# each labelled; a summary names each line's result and time.
KAFKA_FULL    ?= 4.0.2
KAFKA_SUBSET  ?= 4.1.2 4.2.2 4.3.1 3.9.2
VERSION_TESTS := ^(TestUncleanElectionLoss|TestReconcileTwoRoundtrips|TestKilledDuringCatchUp|TestAuditAfterUncleanElection|TestUncleanElectionDivergence|TestFindClassInResolvedJars|TestDumpLogJudgeRealTool)$$
KAFKA_PKGS    := ./integration/... ./cmd/kfollower/

test-versions:
	@summary=""; failed=0; passed=0; \
	for v in $(KAFKA_FULL) $(KAFKA_SUBSET); do \
	  case " $(KAFKA_FULL) " in *" $$v "*) what="whole suite"; run="";; *) what="reconciliation, unclean election, crash, audit"; run='$(VERSION_TESTS)';; esac; \
	  echo "==== Kafka $$v: $$what ===="; start=$$(date +%s); \
	  if KAFKA_VERSION=$$v $(GO) test -count=1 -timeout 30m $${run:+-run "$$run"} $(KAFKA_PKGS); then r=ok; passed=$$((passed+1)); else r=FAILED; failed=$$((failed+1)); fi; \
	  line="Kafka $$v ($$what): $$r in $$(( $$(date +%s) - start ))s"; echo "==== $$line ===="; summary="$$summary$$line\n"; \
	done; \
	printf "==== Kafka version matrix ====\n$$summary"; \
	echo "versions: $$passed passed, $$failed failed"; \
	[ $$failed -eq 0 ]

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# A local 3-node cluster (the test harness: JVMs, no Docker), a producer and
# kfollower following it; Ctrl-C stops it all. Needs Go, Java 17 and Maven.
demo:
	$(GO) build -o bin/kfollower ./cmd/kfollower
	$(GO) build -o bin/kfollower-demo ./integration/demo
	./bin/kfollower-demo --kfollower bin/kfollower $(DEMO_FLAGS)

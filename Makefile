# kfollower. `make test` is the project's test command (README, .ci/run).
GO          ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS        := ./...
# Packages that start real Kafka brokers.
INTEGRATION := ./integration/...

.PHONY: test test-unit test-integration test-versions lint fmt build demo
.PHONY: test-compose

build:
	$(GO) build ./...

# Everything, real Kafka included. Needs Go, Java 17 and Maven.
test:
	$(GO) test -count=1 -timeout 60m $(PKGS)

# No JVM: every package but the integration ones, and not cmd/kfollower's
# end-to-end TestDaemon (which starts a cluster).
test-unit:
	$(GO) test -count=1 -timeout 10m -skip '^TestDaemon$$' $$($(GO) list $(PKGS) | grep -v /integration)

test-integration:
	$(GO) test -count=1 -timeout 60m -v $(INTEGRATION)

# Kafka release lines besides the default (4.4.0, which `make test` runs):
# every Kafka-starting test on 4.0, the reconciliation, unclean-election,
# crash and audit tests on 4.1, 4.2, 4.3 and 3.9; see the script.
test-versions:
	GO=$(GO) bash integration/test-versions.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# The story kfollower exists for, narrated step by step on a local cluster
# (the test harness: a controller and 3 brokers as JVMs, no Docker): a clean
# leader kill with no alarm, an unclean election that loses committed
# records and kfollower's report of them (log line, metric, lost list),
# verify matching again, a console consumer reading kfollower over --serve.
# It ends on its own; DEMO_FLAGS=--stay keeps it running until Ctrl-C, and
# Ctrl-C stops it all at any point. Needs Go, Java 17 and Maven.
demo:
	$(GO) build -o bin/kfollower ./cmd/kfollower
	$(GO) build -o bin/kfollower-demo ./integration/demo
	./bin/kfollower-demo --kfollower bin/kfollower $(DEMO_FLAGS)

# docker-compose.yml for real, on a docker daemon of its own (root; installs
# docker.io if missing, builds local images, stops everything at the end):
# integration/compose/run. Not part of `make test`.
test-compose:
	integration/compose/run
test-rules: ; deploy/test-rules  # the example alerts under promtool (deploy/kfollower-rules.test.yml); root installs promtool

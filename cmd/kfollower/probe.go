package main

import (
	"context"
	"fmt"
	"io"

	"github.com/kfollower/kfollower/audit"
	"github.com/kfollower/kfollower/probe"
)

func init() {
	register(&command{name: "probe", summary: "check the brokers' leader-epoch answers against Kafka's rules, check by check (exit 1 on a failure)", run: runProbe})
}

// runProbe is thin, like verify and lineage: flags in, probe.Run or
// probe.Failover, the report out as a table or JSON, and its exit code (0
// every applicable check passed, 1 one failed, 2 usage or connection
// errors). The connection flags are the audit commands' (newAuditCLI).
func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := newAuditCLI("probe", stdout, stderr, true, "comma-separated `topics` to probe (required without --scenario)")
	scenario := a.fs.String("scenario", "", "`name` of a scenario that writes: \"failover\" creates --scratch-topic, moves its leadership and probes after every move, then deletes it (needs admin rights)")
	scratch := a.fs.String("scratch-topic", "", "`topic` the failover scenario creates, uses and deletes; it must not exist")
	a.doc = `Usage: kfollower probe --bootstrap-servers host:port --topic T [--partition P] [flags]
       kfollower probe --bootstrap-servers host:port --scenario failover --scratch-topic NAME [flags]

Asks each partition's leader the leader-epoch questions whose answers
Kafka's rules fix, and reports check by check (pass, fail, n/a) with the
request, the answer and what was expected:

  lineage_matches_data    the OffsetsForLeaderEpoch walk agrees with the
                          epochs stamped in the batches (KIP-101)
  epochs_between_entries  epochs never led answer (largest below, its end);
                          above the current one (-1, -1) (KIP-279)
  leader_epoch_fencing    a stale CurrentLeaderEpoch is FENCED, a future one
                          UNKNOWN, on Fetch, ListOffsets, OffsetsForLeaderEpoch
                          (KIP-320)
  diverging_epoch         a Fetch with a LastFetchedEpoch/offset pair the
                          leader lacks gets DivergingEpoch (KIP-595)
  offsets_and_watermarks  log start <= LSO <= high watermark <= log end; the
                          high watermark never goes down; epochs add up

Read-only: it only reads (Metadata, ApiVersions, ListOffsets,
OffsetsForLeaderEpoch, Fetch as a consumer). --scenario failover writes,
to its own scratch topic only, and says so before it starts.

Exit status: 0 every applicable check passed, 1 a check failed, 2 usage or
connection errors.

Examples:
  kfollower probe --bootstrap-servers kafka:9092 --topic orders
  kfollower probe --bootstrap-servers kafka:9092 --scenario failover --scratch-topic probe-scratch --json

(--data-dir is not used.)
`
	parts, code := a.start(args)
	if code >= 0 {
		return code
	}
	switch {
	case *scenario != "" && *scenario != "failover":
		return a.fail(&audit.UsageError{Msg: fmt.Sprintf("--scenario %q: the only scenario is failover", *scenario)})
	case *scenario == "failover" && *scratch == "":
		return a.fail(&audit.UsageError{Msg: "--scenario failover needs --scratch-topic"})
	case *scenario == "failover" && (len(a.topics) > 0 || len(parts) > 0):
		return a.fail(&audit.UsageError{Msg: "--scenario failover probes its --scratch-topic only: drop --topic and --partition"})
	case *scenario == "" && *scratch != "":
		return a.fail(&audit.UsageError{Msg: "--scratch-topic is for --scenario failover"})
	case *scenario == "" && len(a.topics) == 0:
		return a.fail(&audit.UsageError{Msg: "--topic is required"})
	}
	cl, err := a.connect(ctx)
	if err != nil {
		return a.fail(err)
	}
	defer cl.Close()
	var rep *probe.Report
	if *scenario == "failover" {
		rep, err = probe.Failover(ctx, probe.FailoverOptions{Client: cl, Topic: *scratch, Log: stderr})
	} else {
		rep, err = probe.Run(ctx, probe.Options{Cluster: probe.KgoCluster(cl), Topics: a.topics, Partitions: parts})
	}
	if err != nil {
		return a.fail(err)
	}
	return a.print(stdout, rep)
}

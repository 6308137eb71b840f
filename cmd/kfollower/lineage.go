package main

import (
	"context"
	"io"

	"github.com/kfollower/kfollower/audit"
)

func init() {
	register(&command{name: "lineage", summary: "reconstruct the leaders' epoch history with OffsetsForLeaderEpoch, beside ours", run: runLineage})
}

func runLineage(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := newAuditCLI("lineage", stdout, stderr, true, "comma-separated `topics` whose leaders to walk (required)")
	local := a.fs.Bool("local", true, "show the local sequence from --data-dir beside the leader's")
	a.doc = `Usage: kfollower lineage --bootstrap-servers host:port --topic T [--partition P] [flags]

Reconstructs each leader's leader-epoch sequence from the outside, by a walk
of OffsetsForLeaderEpoch queries from the current epoch down to the first
(one request per broker per round), and prints it beside the local
sequence from --data-dir, marking where they part.

Exit status: 0 the local sequences are prefixes of the leaders', 1 one
parts, 2 usage or connection errors.

Example:
  kfollower lineage --bootstrap-servers kafka:9092 --topic orders --partition 0
`
	parts, code := a.start(args)
	if code >= 0 {
		return code
	}
	if len(a.topics) == 0 {
		return a.fail(usageErrorf("--topic is required"))
	}
	cl, err := a.connect(ctx)
	if err != nil {
		return a.fail(err)
	}
	defer cl.Close()
	dataDir := a.cfg.DataDir
	if !*local {
		dataDir = ""
	}
	rep, err := audit.Lineage(ctx, audit.LineageOptions{Client: cl, Topics: a.topics, Partitions: parts, DataDir: dataDir})
	if err != nil {
		return a.fail(err)
	}
	return a.print(stdout, rep)
}

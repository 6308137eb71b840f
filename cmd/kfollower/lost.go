package main

import (
	"context"
	"fmt"
	"io"

	"github.com/kfollower/kfollower/lostfound"
)

func init() {
	register(&command{name: "lost", summary: "list the lost+found events, or replay their records to a topic", run: runLost})
}

func runLost(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	lostUsage := func(w io.Writer) {
		fmt.Fprint(w, `Usage:
  kfollower lost list --data-dir DIR [--topic T] [--partition P] [--json]
  kfollower lost replay --bootstrap-servers host:port --data-dir DIR --to-topic X [--dry-run] [flags]

list shows each lost+found event: partition, offsets, cause, epochs,
batches, records, bytes, when it was saved. replay re-produces the lost records
(keys, values, headers, timestamps) to an existing topic, adding the header
`+lostfound.SourceHeader+` = "<topic>/<partition>/<epoch>/<offset>" (the leader
epoch of the lost record's batch: two losses at the same offsets are different
records); it first reads the target and skips records already there, so
running it again adds nothing.
Records of aborted transactions are never replayed; those of transactions
whose outcome the lost range does not show only with --include-undecided.
Only cluster loss is replayed (lost.json's cause offsets-for-leader-epoch,
diverging-epoch, out-of-range-high, or none); events of another cause, such
as discarded-on-gap, only with --include-cause naming it (or all). Records
of the first saved batch below lost.json's from were not lost: never
replayed.

Run 'kfollower lost list --help' or 'kfollower lost replay --help' for flags.
`)
	}
	if len(args) == 0 {
		lostUsage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "list":
		return runLostList(args[1:], stdout, stderr)
	case "replay":
		return runLostReplay(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "-help", "help":
		lostUsage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "kfollower lost: unknown subcommand %q\n\n", args[0])
	lostUsage(stderr)
	return exitUsage
}

// errNoLostDataDir: lostfound takes an empty data dir as its caller's
// mistake; on the command line it is a usage error.
var errNoLostDataDir = usageErrorf("lost: no data dir")

func runLostList(args []string, stdout, stderr io.Writer) int {
	a := newAuditCLI("lost list", stdout, stderr, false, "comma-separated `topics` whose events to list (default: all)")
	a.doc = "Usage: kfollower lost list --data-dir DIR [--topic T] [--partition P] [--json]\n\nExample:\n  kfollower lost list --data-dir /var/lib/kfollower\n"
	parts, code := a.start(args)
	if code >= 0 {
		return code
	}
	if a.cfg.DataDir == "" {
		return a.fail(errNoLostDataDir)
	}
	// lostfound.List takes a data dir without lost+found as one that
	// lost nothing; one that does not exist at all is a mistake (a typo,
	// the wrong host), not reassurance.
	if err := isDir(a.cfg.DataDir); err != nil {
		return a.fail(err)
	}
	rep, err := lostfound.List(lostfound.ListOptions{DataDir: a.cfg.DataDir, Topics: a.topics, Partitions: parts})
	if err != nil {
		return a.fail(err)
	}
	if rep.Events == nil {
		rep.Events = []lostfound.Event{} // "events": [], not null
	}
	return a.print(stdout, rep)
}

func runLostReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := newAuditCLI("lost replay", stdout, stderr, true, "comma-separated `topics` whose events to replay (default: all)")
	to := a.fs.String("to-topic", "", "existing `topic` to produce the lost records to (required)")
	dry := a.fs.Bool("dry-run", false, "decide everything, produce nothing")
	undecided := a.fs.Bool("include-undecided", false, "also replay transactional records whose commit or abort is not in the lost range")
	var causes listFlag
	a.fs.Var(&causes, "include-cause", "comma-separated lost.json `causes` that are not cluster loss to replay too (discarded-on-gap), or all (default: cluster loss only)")
	a.doc = "Usage: kfollower lost replay --bootstrap-servers host:port --data-dir DIR --to-topic X [--dry-run] [flags]\n\nExample:\n  kfollower lost replay --bootstrap-servers kafka:9092 --data-dir /var/lib/kfollower --to-topic orders-restored --dry-run\n"
	parts, code := a.start(args)
	if code >= 0 {
		return code
	}
	if *to == "" {
		return a.fail(usageErrorf("--to-topic is required"))
	}
	if a.cfg.DataDir == "" {
		return a.fail(errNoLostDataDir)
	}
	if err := isDir(a.cfg.DataDir); err != nil {
		return a.fail(err)
	}
	cl, err := a.connect(ctx)
	if err != nil {
		return a.fail(err)
	}
	defer cl.Close()
	rep, err := lostfound.Replay(ctx, lostfound.ReplayOptions{Client: cl, DataDir: a.cfg.DataDir, Topics: a.topics, Partitions: parts,
		ToTopic: *to, DryRun: *dry, IncludeUndecided: *undecided, IncludeCauses: causes})
	if err != nil {
		return a.fail(err)
	}
	return a.print(stdout, rep)
}

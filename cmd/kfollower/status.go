package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

func init() {
	register(&command{name: "status", summary: "show a running kfollower's partitions by state, lag, last truncation and loss (reads its /status)", run: runStatus})
}

const statusDocText = `Usage: kfollower status [--http host:port] [--json]

Reads the /status of a running 'kfollower run' over HTTP and prints, at a
glance: whether it is ready (and why not), the partitions by state, the
total lag, and each partition with its lag, its last truncation and its
last loss since the daemon started (lost+found keeps every one: 'kfollower
lost list'). --json prints the /status document itself.

Exit status: 0 ready, 1 not ready (or stalled, or a loss reported since
start), 2 usage errors or no answer from the daemon.

Examples:
  kfollower status
  kfollower status --http kfollower-0.kfollower:7644 --json
`

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := quiet(flag.NewFlagSet("kfollower status", flag.ContinueOnError))
	addr := fs.String("http", "127.0.0.1"+defaultConfig().HTTP, "`address` of the daemon's HTTP listener (its --http-listen), or a URL")
	asJSON := fs.Bool("json", false, "print the /status document as JSON")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the daemon's answer")
	short := func(err error) int {
		fmt.Fprintf(stderr, "kfollower status: %v\nUsage: kfollower status [--http host:port] [--json]\nRun 'kfollower status --help' for every flag.\n", err)
		return exitUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			io.WriteString(stdout, statusDocText+"\nFlags:\n")
			printFlags(stdout, fs)
			return exitOK
		}
		return short(flagError(fs, err))
	}
	if v := os.Getenv("KFOLLOWER_STATUS_HTTP"); v != "" && !isSet(fs, "http") {
		*addr = v
	}
	if fs.NArg() > 0 {
		return short(fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	url := *addr
	if !strings.Contains(url, "://") {
		if strings.HasPrefix(url, ":") {
			url = "127.0.0.1" + url
		}
		url = "http://" + url
	}
	url = strings.TrimSuffix(url, "/") + "/status"
	rctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	body, err := getStatus(rctx, url)
	if err != nil {
		fmt.Fprintf(stderr, "kfollower status: %v\n", err)
		return exitUsage
	}
	var doc statusDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		fmt.Fprintf(stderr, "kfollower status: %s: not a kfollower /status document: %v\n", url, err)
		return exitUsage
	}
	if *asJSON {
		stdout.Write(body)
	} else if err := writeStatusTable(stdout, &doc); err != nil {
		fmt.Fprintf(stderr, "kfollower status: writing the table: %v\n", err)
		return exitError
	}
	if !doc.Ready || doc.Totals.ByState["stalled"] > 0 || doc.Totals.LostRecords > 0 {
		return exitError
	}
	return exitOK
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func getStatus(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("--http: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking the daemon (is 'kfollower run' listening there? --http is its --http-listen): %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return body, nil
}

// writeStatusTable prints the summary, then one line per partition.
func writeStatusTable(w io.Writer, doc *statusDoc) error {
	var b strings.Builder
	if doc.Ready {
		b.WriteString("ready\n")
	} else {
		fmt.Fprintf(&b, "NOT READY: %s\n", doc.NotReady)
	}
	t := doc.Totals
	fmt.Fprintf(&b, "cluster: %s\n", doc.Cluster)
	states := make([]string, 0, len(t.ByState))
	for s := range t.ByState {
		states = append(states, s)
	}
	sort.Strings(states)
	var byState []string
	for _, s := range states {
		byState = append(byState, fmt.Sprintf("%d %s", t.ByState[s], s))
	}
	if len(byState) == 0 {
		byState = []string{"none yet"}
	}
	fmt.Fprintf(&b, "partitions: %d (%s), %d caught up\n", t.Partitions, strings.Join(byState, ", "), t.CaughtUp)
	fmt.Fprintf(&b, "lag: %d records\n", t.LagRecords)
	if t.LastLoss != nil {
		fmt.Fprintf(&b, "LOSS: %d committed records lost since start; latest %s-%d offsets [%d..%d] (%d records); see 'kfollower lost list'\n",
			t.LostRecords, t.LastLoss.Topic, t.LastLoss.Partition, t.LastLoss.From, t.LastLoss.To-1, t.LastLoss.Records)
	} else {
		b.WriteString("loss: none since start\n")
	}
	if doc.Serve != nil {
		fmt.Fprintf(&b, "serving: %s (advertised %s)\n", doc.Serve.Address, doc.Serve.Advertised)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if len(doc.Partitions) == 0 {
		return nil
	}
	io.WriteString(w, "\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tSTATE\tLEADER\tEPOCH\tLOG END\tHIGH WATERMARK\tLAG\tIN FLIGHT\tLAST TRUNCATION\tLAST LOSS")
	for _, p := range doc.Partitions {
		inFlight := "-"
		if p.InFlight != "" {
			inFlight = fmt.Sprintf("%s %.1fs", p.InFlight, p.InFlightAgeSeconds)
		}
		trunc := "-"
		if tr := p.LastTruncation; tr != nil {
			trunc = fmt.Sprintf("[%d..%d) epoch %d->%d", tr.From, tr.To, tr.OldLeaderEpoch, tr.NewLeaderEpoch)
		}
		loss := "-"
		if l := p.LastLost; l != nil {
			loss = fmt.Sprintf("%d records [%d..%d] %s", l.Records, l.From, l.To-1, l.Cause)
		}
		state := p.State
		if p.Error != "" && p.State != "fetching" {
			state += " (" + p.Error + ")"
		}
		fmt.Fprintf(tw, "%s-%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", p.Topic, p.Partition, state, p.Leader, p.LeaderEpoch,
			p.LogEndOffset, p.HighWatermark, p.Lag, inFlight, trunc, loss)
	}
	return tw.Flush()
}

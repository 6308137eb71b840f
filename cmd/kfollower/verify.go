package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kfollower/kfollower/audit"
	"github.com/twmb/franz-go/pkg/kgo"
)

// verify, lineage and lost (issue 6) are thin: flags in, an audit.* call,
// the report out as a table or JSON, and the report's exit code: 0 all
// match, 1 a divergence, 2 usage or connection errors (audit.Exit*).

func init() {
	register(&command{name: "verify", summary: "compare the local copy with the current leaders, batch by batch (exit 1 on a divergence)", run: runVerify})
}

// auditCLI holds the flags the audit commands share. The connection flags
// and --data-dir are run's own (same names, help and KFOLLOWER_* variables),
// borrowed from its flag set so they cannot drift apart.
type auditCLI struct {
	name       string
	cfg        *config
	fs         *flag.FlagSet
	json       bool
	topics     listFlag
	partitions listFlag
}

var connectionFlags = []string{"bootstrap-servers", "tls", "tls-ca", "tls-cert", "tls-key", "tls-server-name",
	"tls-insecure-skip-verify", "sasl-mechanism", "sasl-username", "sasl-password", "sasl-password-file"}

func newAuditCLI(name string, stderr io.Writer, cluster bool) *auditCLI {
	a := &auditCLI{name: name, cfg: defaultConfig()}
	a.fs = flag.NewFlagSet("kfollower "+name, flag.ContinueOnError)
	a.fs.SetOutput(stderr)
	run := a.cfg.flags(io.Discard)
	names := []string{"data-dir"}
	if cluster {
		names = append(names, connectionFlags...)
	}
	for _, n := range names {
		f := run.Lookup(n)
		usage := f.Usage
		if n == "data-dir" {
			// run's text speaks of its lock; these tools only read.
			usage = "`directory` of the local copy that 'kfollower run' writes; only read here, so a running daemon may keep writing it"
		}
		a.fs.Var(f.Value, f.Name, usage)
	}
	a.fs.BoolVar(&a.json, "json", false, "print the report as JSON instead of a table")
	a.fs.Var(&a.topics, "topic", "comma-separated `topics` to look at (default: all)")
	a.fs.Var(&a.partitions, "partition", "comma-separated partition `numbers` to look at (default: all)")
	return a
}

// parse parses args, then fills flags not given from KFOLLOWER_* variables
// (flags win over the environment, as for run). It returns the exit code
// to end with, or -1 to go on.
func (a *auditCLI) parse(args []string, getenv func(string) string) int {
	if err := a.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	set := map[string]bool{}
	a.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	a.fs.VisitAll(func(f *flag.Flag) {
		if v := getenv(envName(f.Name)); v != "" && !set[f.Name] && envErr == nil {
			if err := a.fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("invalid value %q for %s: %v", v, envName(f.Name), err)
			}
		}
	})
	if envErr != nil {
		fmt.Fprintf(a.fs.Output(), "kfollower %s: %v\n", a.name, envErr)
		return exitUsage
	}
	if a.fs.NArg() > 0 {
		fmt.Fprintf(a.fs.Output(), "kfollower %s: unexpected arguments %q\n", a.name, a.fs.Args())
		return exitUsage
	}
	return -1
}

func (a *auditCLI) partitionList() ([]int32, error) {
	var out []int32
	for _, s := range a.partitions {
		p, err := strconv.ParseInt(s, 10, 32)
		if err != nil || p < 0 {
			return nil, fmt.Errorf("--partition: %q is not a partition number", s)
		}
		out = append(out, int32(p))
	}
	return out, nil
}

// client connects as run does (TLS, SASL), without run's hooks.
func (a *auditCLI) client() (*kgo.Client, error) {
	c := a.cfg
	if len(c.Bootstrap) == 0 {
		return nil, &audit.UsageError{Msg: "--bootstrap-servers is required"}
	}
	if c.SASLMechanism != "none" && c.SASLUser == "" {
		return nil, &audit.UsageError{Msg: fmt.Sprintf("--sasl-mechanism %s needs --sasl-username", c.SASLMechanism)}
	}
	opts, err := clientOpts(c)
	if err != nil {
		return nil, err
	}
	if c.SASLMechanism != "none" {
		password := c.SASLPassword
		if c.SASLPasswordFile != "" {
			b, err := os.ReadFile(c.SASLPasswordFile)
			if err != nil {
				return nil, fmt.Errorf("reading the SASL password: %w", err)
			}
			password = strings.TrimRight(string(b), "\r\n")
		}
		opts = append(opts, saslOpt(c.SASLMechanism, c.SASLUser, password))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("creating the Kafka client: %w", err)
	}
	return cl, nil
}

// fail reports err and returns its exit code (2: usage or connection).
func (a *auditCLI) fail(err error) int {
	fmt.Fprintf(a.fs.Output(), "kfollower %s: %v\n", a.name, err)
	var ue *audit.UsageError
	if errors.As(err, &ue) {
		a.fs.Usage()
	}
	return audit.ExitCodeFor(err)
}

type auditReport interface {
	WriteTable(io.Writer) error
	ExitCode() int
}

// print writes the report as a table or JSON and returns its exit code.
func (a *auditCLI) print(stdout io.Writer, r auditReport) int {
	var err error
	if a.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(r)
	} else {
		err = r.WriteTable(stdout)
	}
	if err != nil {
		return a.fail(fmt.Errorf("writing the report: %w", err))
	}
	return r.ExitCode()
}

func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := newAuditCLI("verify", stderr, true)
	parallel := a.fs.Int("parallel", 4, "partitions verified at once")
	a.fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: kfollower verify --bootstrap-servers host:port --data-dir DIR [flags]

Compares the local copy of each partition in the data dir with its current
leader: for every local batch, base offset, last offset, partition leader
epoch and CRC, fetched as a consumer. Reports the verified range, the first
divergence, and whether the local leader-epoch sequence is a prefix of the
leader's. Reads the data dir only, so it can run beside 'kfollower run'.

Exit status: 0 all match, 1 a divergence, 2 usage or connection errors.

Example:
  kfollower verify --bootstrap-servers kafka:9092 --data-dir /var/lib/kfollower --topic orders

Flags:
`)
		a.fs.PrintDefaults()
	}
	if code := a.parse(args, os.Getenv); code >= 0 {
		return code
	}
	parts, err := a.partitionList()
	if err != nil {
		return a.fail(&audit.UsageError{Msg: err.Error()})
	}
	cl, err := a.client()
	if err != nil {
		return a.fail(err)
	}
	defer cl.Close()
	bar := newProgressBar(stderr)
	rep, err := audit.Verify(ctx, audit.VerifyOptions{Client: cl, DataDir: a.cfg.DataDir, Topics: a.topics,
		Partitions: parts, Parallel: *parallel, Progress: bar.update})
	bar.done()
	if err != nil {
		return a.fail(err)
	}
	return a.print(stdout, rep)
}

// progressBar draws one line of verify progress on a terminal (nothing
// otherwise), at most five times a second.
type progressBar struct {
	w    io.Writer
	on   bool
	mu   sync.Mutex
	last time.Time
	at   map[string]audit.VerifyProgress
}

func newProgressBar(w io.Writer) *progressBar {
	on := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			on = true
		}
	}
	return &progressBar{w: w, on: on, at: map[string]audit.VerifyProgress{}}
}

func (b *progressBar) update(p audit.VerifyProgress) {
	if !b.on {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.at[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] = p
	if time.Since(b.last) < 200*time.Millisecond {
		return
	}
	b.last = time.Now()
	var done, total, bytes int64
	for _, q := range b.at {
		done, total, bytes = done+q.Offset, total+q.End, bytes+q.Bytes
	}
	pct := 100.0
	if total > 0 {
		pct = float64(done) / float64(total) * 100
	}
	fmt.Fprintf(b.w, "\rverifying: %d partitions, %5.1f%% of offsets, %d MiB compared ", len(b.at), pct, bytes>>20)
}

func (b *progressBar) done() {
	if b.on && len(b.at) > 0 {
		fmt.Fprint(b.w, "\r\033[K")
	}
}

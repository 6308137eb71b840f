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
	"time"

	"github.com/kfollower/kfollower/audit"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The tools' commands (verify.go, lineage.go, lost.go) are thin: flags in,
// one call of package audit or lostfound, the report out as a table or
// JSON, and its exit code: 0 all match, 1 a divergence, 2 usage or
// connection errors (audit.ExitOK, ExitMismatch, ExitError; the lost
// commands use the same). A command file holds its command; what they
// share is here.

// auditCLI holds the flags the audit commands share. The connection flags
// and --data-dir are run's own (same names, help and KFOLLOWER_* variables),
// borrowed from its flag set so they cannot drift apart.
type auditCLI struct {
	name           string
	cfg            *config
	fs             *flag.FlagSet
	stdout, stderr io.Writer
	// doc is the help above the flags; its first paragraph, the synopsis,
	// is all of it a mistake prints.
	doc        string
	json       bool
	topics     listFlag
	partitions listFlag
}

var connectionFlags = []string{"bootstrap-servers", "tls", "tls-ca", "tls-cert", "tls-key", "tls-server-name",
	"tls-insecure-skip-verify", "sasl-mechanism", "sasl-username", "sasl-password", "sasl-password-file"}

// newAuditCLI makes a command's flag set; topicHelp is --topic's help
// (what it defaults to differs by command).
func newAuditCLI(name string, stdout, stderr io.Writer, cluster bool, topicHelp string) *auditCLI {
	a := &auditCLI{name: name, cfg: defaultConfig(), stdout: stdout, stderr: stderr}
	a.fs = quiet(flag.NewFlagSet("kfollower "+name, flag.ContinueOnError))
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
	if cluster {
		alias(a.fs, "bootstrap-server", "bootstrap-servers")
	}
	a.fs.BoolVar(&a.json, "json", false, "print the report as JSON instead of a table")
	a.fs.Var(&a.topics, "topic", topicHelp)
	alias(a.fs, "topics", "topic") // run's spelling
	a.fs.Var(&a.partitions, "partition", "comma-separated partition `numbers` to look at (default: all)")
	return a
}

// usage prints the whole help: the command's doc, then its flags.
func (a *auditCLI) usage(w io.Writer) {
	io.WriteString(w, a.doc)
	io.WriteString(w, "\nFlags:\n")
	printFlags(w, a.fs)
}

// shortUsage is what a mistake prints after its message: the synopsis and
// where the rest is.
func (a *auditCLI) shortUsage(w io.Writer) {
	synopsis, _, _ := strings.Cut(a.doc, "\n\n")
	fmt.Fprintf(w, "%s\nRun 'kfollower %s --help' for every flag and an example.\n", synopsis, a.name)
}

// parse parses args, then fills flags not given from KFOLLOWER_* variables
// (flags win over the environment, as for run). It returns the exit code
// to end with, or -1 to go on. Help goes to stdout.
func (a *auditCLI) parse(args []string, getenv func(string) string) int {
	if err := a.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			a.usage(a.stdout)
			return exitOK
		}
		return a.fail(usageError{flagError(a.fs, err)})
	}
	set := map[string]bool{}
	a.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	a.fs.VisitAll(func(f *flag.Flag) {
		if _, isAlias := f.Value.(aliasValue); isAlias {
			return
		}
		if v := getenv(envName(f.Name)); v != "" && !set[f.Name] && envErr == nil {
			if err := a.fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("invalid value %q for %s: %v", v, envName(f.Name), err)
			}
		}
	})
	if envErr != nil {
		return a.fail(usageError{envErr})
	}
	if a.fs.NArg() > 0 {
		return a.fail(usageErrorf("unexpected arguments %q", a.fs.Args()))
	}
	return -1
}

// start is the audit commands' prologue: parse args (from os.Getenv
// too) and the --partition list. It returns the partitions, and the exit
// code to end with, or -1 to go on.
func (a *auditCLI) start(args []string) ([]int32, int) {
	if code := a.parse(args, os.Getenv); code >= 0 {
		return nil, code
	}
	parts, err := a.partitionList()
	if err != nil {
		return nil, a.fail(err)
	}
	return parts, -1
}

func (a *auditCLI) partitionList() ([]int32, error) {
	var out []int32
	for _, s := range a.partitions {
		p, err := strconv.ParseInt(s, 10, 32)
		if err != nil || p < 0 {
			return nil, usageErrorf("--partition: %q is not a partition number", s)
		}
		out = append(out, int32(p))
	}
	return out, nil
}

// client connects as run does (TLS, SASL), without run's hooks.
func (a *auditCLI) client() (*kgo.Client, error) {
	c := a.cfg
	if len(c.Bootstrap) == 0 {
		return nil, usageErrorf("--bootstrap-servers is required")
	}
	if c.SASLMechanism != "none" && c.SASLUser == "" {
		return nil, usageErrorf("--sasl-mechanism %s needs --sasl-username", c.SASLMechanism)
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

// connect makes the client and asks the cluster for its brokers, so an
// unreachable cluster is an error (exit 2) before any report can read as
// "all match" for having asked nothing.
func (a *auditCLI) connect(ctx context.Context) (*kgo.Client, error) {
	cl, err := a.client()
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("cluster at %s unreachable: %s", a.cfg.Bootstrap.String(), describeDialError(err))
	}
	return cl, nil
}

// isDir checks that a data dir given to a reading tool exists.
func isDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("data dir %s is not a directory", dir)
	}
	return nil
}

// usageErrorf is a bad command line: fail prints the command's usage
// after it.
func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// fail reports err, with the usage text for a bad command line (the
// command's own checks, or an audit.UsageError), and returns its exit code:
// 2, usage or connection errors, for every tool (audit.ExitCodeFor).
func (a *auditCLI) fail(err error) int {
	fmt.Fprintf(a.stderr, "kfollower %s: %v\n", a.name, err)
	var ue *audit.UsageError
	if errors.As(err, &ue) || errors.As(err, new(usageError)) {
		a.shortUsage(a.stderr)
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

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

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

// usageErrorf is a bad command line: fail prints the command's usage
// after it.
func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// fail reports err, with the usage text for a bad command line (the
// command's own checks, or an audit.UsageError), and returns its exit code:
// 2, usage or connection errors, for every tool (audit.ExitCodeFor).
func (a *auditCLI) fail(err error) int {
	fmt.Fprintf(a.fs.Output(), "kfollower %s: %v\n", a.name, err)
	var ue *audit.UsageError
	if errors.As(err, &ue) || errors.As(err, new(usageError)) {
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

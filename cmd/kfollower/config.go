package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// config is everything `kfollower run` is told. Every field is a flag; the
// same name in upper case with '-' as '_' and a KFOLLOWER_ prefix is its
// environment variable, and the flag name is its key in the YAML file.
// Flags win over the environment, which wins over the file.
type config struct {
	ConfigFile string

	Bootstrap listFlag
	Topics    listFlag
	DataDir   string
	HTTP      string

	TLS             bool
	TLSCA           string
	TLSCert         string
	TLSKey          string
	TLSServerName   string
	TLSInsecureSkip bool

	SASLMechanism    string
	SASLUser         string
	SASLPassword     string
	SASLPasswordFile string

	// FetchConnection is direct (the fetcher's own Fetch connections,
	// fetcher.Config.DirectFetch) or client (every Fetch through
	// franz-go); fetchConnectionSet: given by flag, environment or file,
	// not the default, which under SASL quietly means client.
	FetchConnection    string
	fetchConnectionSet bool

	Flush          string
	FlushInterval  time.Duration
	RetentionBytes int64
	RetentionTime  time.Duration
	SegmentBytes   int64
	DiscardOnGap   bool

	MetadataInterval time.Duration
	ProgressInterval time.Duration
	StallAfter       time.Duration
	LogLevel         string
	LogFormat        string

	Serve          string
	ServeAdvertise string
	ServeNodeID    int
	ServeGroups    string
	serveSecurity  // serve_sec.go
}

// listFlag is a comma-separated list; a YAML sequence is accepted too.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	*l = nil
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			*l = append(*l, e)
		}
	}
	return nil
}

// enumFlag is a string restricted to a few values.
type enumFlag struct {
	p       *string
	allowed []string
}

func (e enumFlag) String() string {
	if e.p == nil {
		return ""
	}
	return *e.p
}
func (e enumFlag) Set(s string) error {
	for _, a := range e.allowed {
		if strings.EqualFold(s, a) {
			*e.p = a
			return nil
		}
	}
	return fmt.Errorf("must be one of %s", strings.Join(e.allowed, ", "))
}

// setFlag is a flag that records whether it was given (by flag,
// environment or file), for a default that means something else than the
// same value given explicitly.
type setFlag struct {
	flag.Value
	set *bool
}

func (f setFlag) Set(s string) error {
	if err := f.Value.Set(s); err != nil {
		return err
	}
	*f.set = true
	return nil
}

// sizeFlag is a byte count with an optional unit: 1048576, 512KiB, 10GiB, 1GB.
type sizeFlag struct{ p *int64 }

func (s sizeFlag) String() string {
	if s.p == nil {
		return ""
	}
	return strconv.FormatInt(*s.p, 10)
}
func (s sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s.p = n
	return nil
}

func parseSize(v string) (int64, error) {
	v = strings.TrimSpace(v)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSpace(strings.TrimSuffix(v, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, errors.New("want a byte count such as 1073741824, 512MiB or 10GiB")
	}
	return n * mult, nil
}

func defaultConfig() *config {
	return &config{
		DataDir: "data",
		// 7644: outside Prometheus's exporter range (9100-9999, all
		// allocated) and clear of the Kafka ecosystem's ports: Kafka
		// 9092-9094, Redpanda admin 9644, Schema Registry 8081, REST
		// Proxy 8082, Connect 8083, Control Center 9021, JMX 9999,
		// jmx_exporter 7071, and the common 8080/9090/9100.
		HTTP:             ":7644",
		SASLMechanism:    "none",
		FetchConnection:  "direct",
		Flush:            "interval",
		FlushInterval:    time.Second,
		RetentionBytes:   -1,
		SegmentBytes:     1 << 30,
		MetadataInterval: 5 * time.Second,
		ProgressInterval: 10 * time.Second,
		// A leader holds a fetch for at most 500 ms when it has nothing
		// new (wire.DefaultFetchLimits.MaxWaitMillis, Kafka's
		// replica.fetch.wait.max.ms), and answers the other requests at
		// once; kgo gives up on a connection after 10 s plus that wait
		// (kgo.RequestTimeoutOverhead). 5 s is ten long polls, and shows
		// a hung leader before kgo's own deadline resets the connection
		// and the state machine backs off.
		StallAfter: 5 * time.Second,
		LogLevel:   "info",
		LogFormat:  "text",
	}
}

// flags binds c's fields to a new FlagSet.
func (c *config) flags(out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kfollower run", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.ConfigFile, "config", c.ConfigFile, "optional YAML `file`; its keys are these flag names")
	fs.Var(&c.Bootstrap, "bootstrap-servers", "Kafka brokers to start from, `host:port,...` (required)")
	fs.Var(&c.Topics, "topics", "comma-separated `list` of topics to follow (required); an entry with characters a topic name cannot have is an anchored regular expression, so 'orders,logs-.*' follows orders and every topic starting logs-, also those created later")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "`directory` of the local copy, one Kafka-format partition directory per partition; locked against a second instance")
	fs.StringVar(&c.HTTP, "http-listen", c.HTTP, "`address` of the HTTP listener: /metrics, /healthz, /readyz, /status")
	fs.BoolVar(&c.TLS, "tls", c.TLS, "connect with TLS (implied by any other tls- flag)")
	fs.StringVar(&c.TLSCA, "tls-ca", c.TLSCA, "PEM `file` of the CAs that sign the brokers' certificates (default: the system's)")
	fs.StringVar(&c.TLSCert, "tls-cert", c.TLSCert, "PEM `file` of the client certificate, for mutual TLS")
	fs.StringVar(&c.TLSKey, "tls-key", c.TLSKey, "PEM `file` of the client certificate's key")
	fs.StringVar(&c.TLSServerName, "tls-server-name", c.TLSServerName, "`name` to verify the brokers' certificates against (default: the host dialled)")
	fs.BoolVar(&c.TLSInsecureSkip, "tls-insecure-skip-verify", c.TLSInsecureSkip, "do not verify the brokers' certificates (testing only)")
	fs.Var(enumFlag{&c.SASLMechanism, []string{"none", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}}, "sasl-mechanism", "SASL `mechanism`: none, PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.StringVar(&c.SASLUser, "sasl-username", c.SASLUser, "SASL `user`")
	fs.StringVar(&c.SASLPassword, "sasl-password", c.SASLPassword, "SASL `password`; prefer KFOLLOWER_SASL_PASSWORD or --sasl-password-file, which do not show in ps")
	fs.StringVar(&c.SASLPasswordFile, "sasl-password-file", c.SASLPasswordFile, "`file` holding the SASL password (a trailing newline is ignored)")
	fs.Var(setFlag{enumFlag{&c.FetchConnection, []string{"direct", "client"}}, &c.fetchConnectionSet}, "fetch-connection", "`connection` the Fetches go on: direct (kfollower's own to each leader, reading each response into a reused buffer; under --sasl-mechanism the default falls back to client) or client (the franz-go client's, as every other request: for a network path only the client is set up for)")
	fs.Var(enumFlag{&c.Flush, []string{"always", "interval", "os"}}, "flush", "`policy` for fsyncing appended data: always (every append), interval (every --flush-interval), os (left to the OS, as Kafka's default; a follower can refetch what a power loss takes)")
	fs.DurationVar(&c.FlushInterval, "flush-interval", c.FlushInterval, "fsync `interval` under --flush=interval")
	fs.Var(sizeFlag{&c.RetentionBytes}, "retention-bytes", "local retention per partition: delete the oldest segments past this `size` (e.g. 10GiB; -1: keep everything)")
	fs.DurationVar(&c.RetentionTime, "retention-time", c.RetentionTime, "local retention: delete segments whose newest record is older than this `duration` (0: keep everything)")
	fs.Var(sizeFlag{&c.SegmentBytes}, "segment-bytes", "roll a local segment at this `size` (Kafka's segment.bytes)")
	fs.BoolVar(&c.DiscardOnGap, "discard-on-gap", c.DiscardOnGap, "when the cluster deleted offsets before we copied them, drop our copy and start at the leader's log start, as a Kafka follower does (default: keep it)")
	fs.DurationVar(&c.MetadataInterval, "metadata-interval", c.MetadataInterval, "how often leaders and new matching topics are looked up")
	fs.DurationVar(&c.ProgressInterval, "progress-interval", c.ProgressInterval, "how often catch-up progress is logged")
	fs.DurationVar(&c.StallAfter, "stall-after", c.StallAfter, "a request to a leader in the air longer than this `duration` shows its partition as stalled in /status and kfollower_partition_state (a hung leader; a healthy fetch is answered within 500ms)")
	fs.Var(enumFlag{&c.LogLevel, []string{"debug", "info", "warn", "error"}}, "log-level", "`level`: debug, info, warn or error")
	fs.Var(enumFlag{&c.LogFormat, []string{"text", "json"}}, "log-format", "`format` of the log on stderr: text or json")
	c.serveFlags(fs)
	// Kafka's tools spell them --bootstrap-server and --topic.
	alias(fs, "bootstrap-server", "bootstrap-servers")
	alias(fs, "topic", "topics")
	return fs
}

// envName is the environment variable of a flag.
func envName(flagName string) string {
	return "KFOLLOWER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// usageError is bad input on the command line or in the environment: exit 2
// with usage. Other errors exit 1.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// loadConfig merges the file, the environment and args, in that order so
// that each overrides the one before.
func loadConfig(args []string, getenv func(string) string, flagOut io.Writer) (*config, error) {
	// A first pass finds bad flags and the config file before anything else.
	probe := defaultConfig()
	pfs := quiet(probe.flags(flagOut))
	if err := pfs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{flagError(pfs, err)}
	}
	if pfs.NArg() > 0 {
		return nil, usageError{fmt.Errorf("unexpected arguments %q (topics go in --topics)", pfs.Args())}
	}
	path := probe.ConfigFile
	if path == "" {
		path = getenv(envName("config"))
	}
	c := defaultConfig()
	fs := c.flags(io.Discard)
	if path != "" {
		if err := applyFile(fs, path); err != nil {
			return nil, err
		}
		c.ConfigFile = path
	}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		v := getenv(envName(f.Name))
		if _, isAlias := f.Value.(aliasValue); v == "" || f.Name == "config" || isAlias {
			return
		}
		if err := fs.Set(f.Name, v); err != nil && envErr == nil {
			envErr = usageError{fmt.Errorf("invalid value %q for %s: %v", v, envName(f.Name), err)}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	if err := fs.Parse(args); err != nil { // cannot fail: the probe parsed the same args
		return nil, usageError{err}
	}
	return c, nil
}

// applyFile sets flags from a YAML mapping of flag names to values. Errors
// name the file and line.
func applyFile(fs *flag.FlagSet, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading config file: %w", err)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file
		}
		return fmt.Errorf("config file %s: %v", path, err)
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("config file %s:%d: want a mapping of flag names to values", path, root.Line)
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		f := fs.Lookup(k.Value)
		if f == nil || k.Value == "config" {
			return fmt.Errorf("config file %s:%d: unknown key %q (keys are the flag names of kfollower run)", path, k.Line, k.Value)
		}
		var val string
		switch v.Kind {
		case yaml.ScalarNode:
			val = v.Value
		case yaml.SequenceNode:
			var parts []string
			for _, e := range v.Content {
				if e.Kind != yaml.ScalarNode {
					return fmt.Errorf("config file %s:%d: %s: want a list of strings", path, e.Line, k.Value)
				}
				parts = append(parts, e.Value)
			}
			val = strings.Join(parts, ",")
		default:
			return fmt.Errorf("config file %s:%d: %s: want a value or a list", path, v.Line, k.Value)
		}
		if err := fs.Set(k.Value, val); err != nil {
			return fmt.Errorf("config file %s:%d: invalid value %q for %s: %v", path, v.Line, val, k.Value, err)
		}
	}
	return nil
}

// topicName is what a Kafka topic name may hold; an entry with any other
// character is a regular expression.
var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// topicMatcher compiles --topics.
func topicMatcher(entries []string) (func(string) bool, error) {
	names := map[string]bool{}
	var res []*regexp.Regexp
	for _, e := range entries {
		if topicName.MatchString(e) {
			names[e] = true
			continue
		}
		re, err := regexp.Compile("^(?:" + e + ")$")
		if err != nil {
			return nil, fmt.Errorf("--topics: %q is neither a topic name nor a valid regular expression: %v", e, err)
		}
		res = append(res, re)
	}
	return func(t string) bool {
		if names[t] {
			return true
		}
		for _, re := range res {
			if re.MatchString(t) {
				return true
			}
		}
		return false
	}, nil
}

// check validates what flags cannot: required values and their combinations.
func (c *config) check() error {
	switch {
	case len(c.Bootstrap) == 0:
		return usageError{errors.New("--bootstrap-servers is required")}
	case len(c.Topics) == 0:
		return usageError{errors.New("--topics is required")}
	case c.DataDir == "":
		return usageError{errors.New("--data-dir must not be empty")}
	case c.FlushInterval <= 0 && c.Flush == "interval":
		return usageError{errors.New("--flush-interval must be positive")}
	case c.SegmentBytes <= 0 || c.SegmentBytes > 1<<31-1:
		return usageError{errors.New("--segment-bytes must be between 1 and 2147483647")}
	case c.MetadataInterval <= 0, c.ProgressInterval <= 0, c.StallAfter <= 0:
		return usageError{errors.New("--metadata-interval, --progress-interval and --stall-after must be positive")}
	case c.SASLPassword != "" && c.SASLPasswordFile != "":
		return usageError{errors.New("give the SASL password once: --sasl-password (or KFOLLOWER_SASL_PASSWORD) or --sasl-password-file")}
	case c.SASLMechanism != "none" && c.SASLUser == "":
		return usageError{fmt.Errorf("--sasl-mechanism %s needs --sasl-username", c.SASLMechanism)}
	case c.SASLMechanism != "none" && c.FetchConnection == "direct" && c.fetchConnectionSet:
		// The default falls back to the client quietly (directFetch); an
		// explicit direct cannot be honoured, which the operator should
		// hear at start rather than find in the metrics.
		return usageError{fmt.Errorf("--fetch-connection direct cannot be used with --sasl-mechanism %s: kfollower's own Fetch connections speak no SASL; use --fetch-connection client, or leave it unset to fetch through the client", c.SASLMechanism)}
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return usageError{errors.New("--tls-cert and --tls-key go together")}
	}
	if _, err := topicMatcher(c.Topics); err != nil {
		return usageError{err}
	}
	if err := checkListen("--http-listen", c.HTTP); err != nil {
		return usageError{err}
	}
	if err := c.checkServe(); err != nil {
		return err // exit 1, as a --http-listen that cannot be bound
	}
	for _, b := range c.Bootstrap {
		if _, port, ok := strings.Cut(b, ":"); !ok || port == "" {
			return usageError{fmt.Errorf("--bootstrap-servers: %q is not host:port", b)}
		}
	}
	return nil
}

// checkListen checks a listen address: host:port, the host may be empty
// (every interface). "9644" alone would make net.Listen fail only after
// the cluster answered; refused here, up front.
func checkListen(flagName, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: want host:port or :port (e.g. :%s): %v", flagName, addr, strings.TrimPrefix(addr, ":"), err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%s %q: bad port %q", flagName, addr, port)
	}
	return nil
}

func (c *config) tlsEnabled() bool {
	return c.TLS || c.TLSCA != "" || c.TLSCert != "" || c.TLSServerName != "" || c.TLSInsecureSkip
}

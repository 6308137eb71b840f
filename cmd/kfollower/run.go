package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/metrics"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

func init() {
	register(&command{name: "run", summary: "follow topics of a Kafka cluster into a local copy (the daemon)", run: runCommand})
}

const runExamples = `
Examples:
  # Follow two topics and every topic whose name starts with "audit-".
  kfollower run --bootstrap-servers 127.0.0.1:9092 --topics orders,payments,audit-.* --data-dir /var/lib/kfollower

  # The same from the environment and a file (flags > KFOLLOWER_* > file).
  KFOLLOWER_BOOTSTRAP_SERVERS=kafka-1:9092,kafka-2:9092 kfollower run --config kfollower.yaml

  # TLS with a private CA, and SASL/SCRAM with the password from a file.
  kfollower run --bootstrap-servers kafka:9093 --topics orders --tls-ca ca.pem \
    --sasl-mechanism SCRAM-SHA-512 --sasl-username kfollower --sasl-password-file /run/secrets/kafka

  # Keep at most 50 GiB or 7 days per partition, fsync every append, JSON logs.
  kfollower run --bootstrap-servers 127.0.0.1:9092 --topics orders --retention-bytes 50GiB \
    --retention-time 168h --flush always --log-format json

A config file holds the same names as keys:
  bootstrap-servers: [kafka-1:9092, kafka-2:9092]
  topics: [orders, "audit-.*"]
  data-dir: /var/lib/kfollower
  retention-bytes: 50GiB

HTTP, up before the cluster is asked anything: /metrics (Prometheus),
/healthz (alive), /readyz (metadata loaded and every followed partition
reconciled once; why not, if not), /status (JSON per partition, with totals;
'kfollower status' prints it as a table).
Exit status: 0 after SIGINT/SIGTERM, 1 on an error, 2 on a bad command line.
`

// runSynopsis is the first line of run's help, and all of it that a
// mistake on the command line prints.
const runSynopsis = "Usage: kfollower run --bootstrap-servers host:port,... --topics list [--data-dir DIR] [flags]\n"

func runUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, runSynopsis+"\nFollows the selected topics of a Kafka cluster into a local copy in Kafka's own\nformat, reconciles with every new leader (KIP-101/KIP-279), and reports committed\ndata the cluster lost.\n\nFlags (each also KFOLLOWER_<NAME> in the environment, NAME upper case with _ for -):\n")
	printFlags(w, fs)
	io.WriteString(w, runExamples)
}

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := loadConfig(args, os.Getenv, io.Discard)
	if errors.Is(err, flag.ErrHelp) {
		runUsage(defaultConfig().flags(stdout), stdout)
		return exitOK
	}
	if err == nil {
		err = cfg.check()
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "kfollower run: %v\n%sRun 'kfollower run --help' for every flag.\n", err, runSynopsis)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintf(stderr, "kfollower run: %v\n", err)
		return exitError
	}
	logger := newLogger(cfg, stderr)
	if err := run(ctx, cfg, logger); err != nil {
		fmt.Fprintf(stderr, "kfollower run: %v\n", err)
		return exitError
	}
	return exitOK
}

func newLogger(cfg *config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: logValue}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// logValue keeps log fields one-line and readable whatever the format: a
// duration as its string ("500ms"; JSON would print nanoseconds), and an
// error of several (errors.Join, one per line) with "; " between them, so
// a JSON field or a text line holds no newline.
func logValue(_ []string, a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindDuration:
		return slog.String(a.Key, v.Duration().String())
	case slog.KindString:
		if s := v.String(); strings.Contains(s, "\n") {
			return slog.String(a.Key, oneLine(s))
		}
	case slog.KindAny:
		if err, ok := v.Any().(error); ok && strings.Contains(err.Error(), "\n") {
			return slog.String(a.Key, oneLine(err.Error()))
		}
	}
	return a
}

func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
}

// run is the daemon: it checks everything it can before it writes anything,
// then locks the data dir, serves HTTP and follows until ctx ends.
func run(ctx context.Context, cfg *config, logger *slog.Logger) (runErr error) {
	follow, err := topicMatcher(cfg.Topics)
	if err != nil {
		return err
	}
	opts, err := clientOpts(cfg)
	if err != nil {
		return err
	}
	if err := checkDataDir(cfg.DataDir); err != nil {
		return err
	}
	if err := checkUnlocked(cfg.DataDir); err != nil {
		return err
	}
	password := cfg.SASLPassword
	if cfg.SASLPasswordFile != "" {
		b, err := os.ReadFile(cfg.SASLPasswordFile)
		if err != nil {
			return fmt.Errorf("reading the SASL password: %w", err)
		}
		password = strings.TrimRight(string(b), "\r\n")
	}
	if cfg.SASLMechanism != "none" {
		opts = append(opts, saslOpt(cfg.SASLMechanism, cfg.SASLUser, password))
	}

	// The HTTP listener comes first, before the cluster is asked
	// anything: /healthz answers, /readyz says why it is not ready and
	// /metrics exports the connection state from the first second. It
	// comes before the data dir is created, so a busy port leaves
	// nothing behind either.
	ln, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		return fmt.Errorf("listening for HTTP on %s: %w", cfg.HTTP, err)
	}
	st := newDaemonState(cfg.StallAfter)
	var ep *endpoint // set before the fetcher runs, read by its Changed

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// kgo's metrics get a registry of their own, exposed without kprom's
	// buffered_* gauges: kfollower buffers nothing through kgo's producer
	// or consumer, and those gauges are named like counters (_total),
	// which fails client_golang's lint.
	kgoReg := prometheus.NewRegistry()
	kp := kprom.NewMetrics(metrics.Namespace, kprom.Registry(kgoReg), kprom.Subsystem("kgo"))
	gatherer := prometheus.Gatherers{reg, dropPrefix{kgoReg, metrics.Namespace + "_kgo_buffered_"}}
	// --serve-groups' upstream clients: the same cluster and credentials,
	// without kgo's metrics hooks (one kprom per client).
	upstreamOpts := append(slices.Clone(opts), kgo.WithLogger(kgoLogger{logger.With("component", "groups")}))
	kfVersion, franzVersion := buildVersions()
	m := metrics.New(reg, metrics.Options{
		Partitions: st.metricsPartitions,
		Ready:      func() bool { ok, _ := st.ready(); return ok },
		Connection: st.connection,
		LostFoundBytes: func() (int64, error) {
			return dirSize(lostFoundRoot(cfg.DataDir))
		},
		Version: kfVersion, GoVersion: runtime.Version(), FranzGoVersion: franzVersion,
	})
	srv := &http.Server{Handler: newMux(gatherer, st), ReadHeaderTimeout: 5 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	// However run ends, the HTTP server ends with it and its error, if
	// any, is run's when nothing else went wrong first.
	defer func() {
		shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutCtx); err != nil {
			srv.Close()
		}
		if err := <-httpDone; err != nil && !errors.Is(err, http.ErrServerClosed) && runErr == nil {
			runErr = fmt.Errorf("HTTP server: %w", err)
		}
	}()
	logger.Info("kfollower started", "version", kfVersion, "bootstrap", cfg.Bootstrap.String(), "topics", cfg.Topics.String(),
		"data_dir", cfg.DataDir, "http", ln.Addr().String())

	opts = append(opts, kgo.WithHooks(kp), kgo.WithLogger(kgoLogger{logger}))
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("creating the Kafka client: %w", err)
	}
	defer client.Close()
	// A cluster that answers but is not Kafka, or refuses our TLS or SASL,
	// is a configuration error: stop before writing anything. A cluster
	// that cannot be reached yet is waited for.
	if err := probeCluster(ctx, client, cfg.Bootstrap, logger, st.setWaiting); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil
	}

	serveLn, err := listenServe(cfg)
	if err != nil {
		return err
	}
	if serveLn != nil {
		defer serveLn.Close() // Serve closes it too; a second Close is harmless
	}
	// Synced: a data directory created here and lost to a power cut with
	// its parent's entry would take every durable byte with it.
	if err := storage.MkdirAllSynced(cfg.DataDir); err != nil {
		return fmt.Errorf("creating data dir: %w", err)
	}
	unlock, err := lockDataDir(cfg.DataDir, true)
	if err != nil {
		return err
	}
	defer unlock()

	storageOpts := storageOptions(cfg)
	storageOpts.OnSync = m.Fsync
	df, err := directFetch(cfg, logger)
	if err != nil {
		return err
	}
	prog := newProgress(logger)
	mgr, err := fetcher.New(fetcher.Config{
		Client:              client,
		DataDir:             cfg.DataDir,
		Follow:              follow,
		Storage:             storageOpts,
		DiscardOnGap:        cfg.DiscardOnGap,
		DirectFetch:         df,
		MetadataInterval:    cfg.MetadataInterval,
		MaintenanceInterval: maintenanceInterval(cfg),
		Logger:              logger,
		Observers:           []fetcher.Observer{metrics.NewFetcherObserver(m), prog},
		NotServed:           serveLn == nil,
		Changed: func(tp wire.TopicPartition) {
			if ep != nil {
				ep.notify(tp)
			}
		},
	})
	if err != nil {
		return err
	}
	if serveLn != nil {
		if ep, err = newEndpoint(ctx, cfg, serveLn, mgr, logger, upstreamOpts, reg, client); err != nil {
			return err
		}
		// A listener that fails for good stops the whole daemon.
		ctx, ep.fail = context.WithCancel(ctx)
		defer ep.fail()
	}
	st.setManager(mgr, ep.statusFunc())
	logger.Info("connected to the cluster", "bootstrap", cfg.Bootstrap.String())

	// The progress logger is owned here: it ends with ctx and is waited
	// for below. It only reads statuses, so it may outlive the logs.
	progDone := make(chan struct{})
	go func() {
		defer close(progDone)
		prog.loop(ctx, cfg.ProgressInterval, st.statuses, m.Observe)
	}()

	mgrCtx := ctx
	if ep != nil {
		mgrCtx = ep.run(ctx)
		logger.Info("serving the copy to Kafka clients", "listen", ep.status.Address, "advertised", ep.status.Advertised,
			"node_id", ep.status.NodeID, "cluster_id", ep.status.ClusterID)
	}
	runErr = mgr.Run(mgrCtx) // returns after ctx ends (and the server has stopped), logs flushed and closed
	if ep != nil {
		if err := ep.wait(); err != nil && runErr == nil {
			runErr = err
		}
	}
	<-progDone
	if runErr == nil {
		logger.Info("kfollower stopped: logs flushed and closed")
	}
	return runErr
}

func maintenanceInterval(cfg *config) time.Duration {
	if cfg.Flush == "interval" {
		return cfg.FlushInterval
	}
	if cfg.RetentionBytes > 0 || cfg.RetentionTime > 0 {
		return 30 * time.Second
	}
	return 0
}

func storageOptions(cfg *config) storage.Options {
	o := storage.Options{
		SegmentBytes:   cfg.SegmentBytes,
		RetentionBytes: cfg.RetentionBytes,
		RetentionAge:   cfg.RetentionTime,
		FlushInterval:  cfg.FlushInterval,
	}
	switch cfg.Flush {
	case "always":
		o.Flush = storage.FlushEveryAppend
	case "interval":
		// The fetcher's flusher fsyncs every --flush-interval beside the
		// workers, off the fetch path, and times each flush
		// (kfollower_flush_duration_seconds); Append never fsyncs.
		o.Flush = storage.FlushInterval
	default:
		o.Flush = storage.FlushOS
	}
	return o
}

// kgoLogger sends franz-go's log lines to slog.
type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel {
	switch {
	case k.l.Enabled(context.Background(), slog.LevelDebug):
		return kgo.LogLevelDebug
	case k.l.Enabled(context.Background(), slog.LevelInfo):
		// kgo warns of every failed dial; kfollower reports unreachable
		// brokers itself, once per retry.
		return kgo.LogLevelError
	default:
		return kgo.LogLevelError
	}
}

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelDebug
	switch level {
	case kgo.LogLevelError:
		lvl = slog.LevelError
	case kgo.LogLevelWarn:
		lvl = slog.LevelWarn
	case kgo.LogLevelInfo:
		lvl = slog.LevelInfo
	}
	k.l.Log(context.Background(), lvl, msg, append([]any{"component", "kgo"}, keyvals...)...)
}

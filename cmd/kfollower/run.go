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

HTTP: /metrics (Prometheus), /healthz (alive), /readyz (metadata loaded and
every followed partition reconciled once), /status (JSON per partition).
Exit status: 0 after SIGINT/SIGTERM, 1 on an error, 2 on a bad command line.
`

func runUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage: kfollower run [flags]\n\nFollows the selected topics of a Kafka cluster into a local copy in Kafka's own\nformat, reconciles with every new leader (KIP-101/KIP-279), and reports committed\ndata the cluster lost.\n\nFlags (each also KFOLLOWER_<NAME> in the environment, NAME upper case with _ for -):\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
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
		fmt.Fprintf(stderr, "kfollower run: %v\n\n", err)
		runUsage(defaultConfig().flags(stderr), stderr)
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
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// run is the daemon: it checks everything it can before it writes anything,
// then locks the data dir, serves HTTP and follows until ctx ends.
func run(ctx context.Context, cfg *config, logger *slog.Logger) error {
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

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// kgo's metrics get a registry of their own, exposed without kprom's
	// buffered_* gauges: kfollower buffers nothing through kgo's producer
	// or consumer, and those gauges are named like counters (_total),
	// which fails client_golang's lint.
	kgoReg := prometheus.NewRegistry()
	kp := kprom.NewMetrics(metrics.Namespace, kprom.Registry(kgoReg), kprom.Subsystem("kgo"))
	gatherer := prometheus.Gatherers{reg, dropPrefix{kgoReg, metrics.Namespace + "_kgo_buffered_"}}
	opts = append(opts, kgo.WithHooks(kp), kgo.WithLogger(kgoLogger{logger}))
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("creating the Kafka client: %w", err)
	}
	defer client.Close()
	// A cluster that answers but is not Kafka, or refuses our TLS or SASL,
	// is a configuration error: stop before writing anything. A cluster
	// that cannot be reached yet is waited for.
	if err := probeCluster(ctx, client, cfg.Bootstrap, logger); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil
	}

	// Listening comes before the data dir is created, so a busy port
	// leaves nothing behind either.
	ln, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		return fmt.Errorf("listening for HTTP on %s: %w", cfg.HTTP, err)
	}
	serveLn, err := listenServe(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	if serveLn != nil {
		defer serveLn.Close() // Serve closes it too; a second Close is harmless
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		ln.Close()
		return fmt.Errorf("creating data dir %s: %w", cfg.DataDir, err)
	}
	unlock, err := lockDataDir(cfg.DataDir, true)
	if err != nil {
		ln.Close()
		return err
	}
	defer unlock()
	var ep *endpoint // set before the fetcher runs, read by its Changed

	// The collector reads mgr, which is set below: nothing scrapes before
	// the HTTP server starts, after fetcher.New. The manager needs the
	// metrics first, for its observer.
	var mgr *fetcher.Manager
	kfVersion, franzVersion := buildVersions()
	m := metrics.New(reg, metrics.Options{
		Partitions: func() []metrics.Partition { return partitions(mgr.Statuses()) },
		Ready:      func() bool { return mgr.Ready() },
		LostFoundBytes: func() (int64, error) {
			return dirSize(lostFoundRoot(cfg.DataDir))
		},
		Version: kfVersion, GoVersion: runtime.Version(), FranzGoVersion: franzVersion,
	})
	storageOpts := storageOptions(cfg)
	storageOpts.OnSync = m.Fsync
	prog := newProgress(logger)
	mgr, err = fetcher.New(fetcher.Config{
		Client:              client,
		DataDir:             cfg.DataDir,
		Follow:              follow,
		Storage:             storageOpts,
		DiscardOnGap:        cfg.DiscardOnGap,
		MetadataInterval:    cfg.MetadataInterval,
		MaintenanceInterval: maintenanceInterval(cfg),
		Logger:              logger,
		Observers:           []fetcher.Observer{metrics.NewFetcherObserver(m), prog},
		Changed: func(tp wire.TopicPartition) {
			if ep != nil {
				ep.notify(tp)
			}
		},
	})
	if err != nil {
		ln.Close()
		return err
	}
	if serveLn != nil {
		if ep, err = newEndpoint(cfg, serveLn, mgr, logger, reg, client); err != nil {
			ln.Close()
			return err
		}
		// A listener that fails for good stops the whole daemon.
		ctx, ep.fail = context.WithCancel(ctx)
		defer ep.fail()
	}

	srv := &http.Server{Handler: newMux(gatherer, mgr, ep.statusFunc()), ReadHeaderTimeout: 5 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	logger.Info("kfollower started", "version", kfVersion, "bootstrap", cfg.Bootstrap.String(), "topics", cfg.Topics.String(),
		"data_dir", cfg.DataDir, "http", ln.Addr().String())

	// The progress logger is owned here: it ends with ctx and is waited
	// for below. It only reads statuses, so it may outlive the logs.
	progDone := make(chan struct{})
	go func() {
		defer close(progDone)
		prog.loop(ctx, cfg.ProgressInterval, mgr.Statuses, m.Observe)
	}()

	mgrCtx := ctx
	if ep != nil {
		mgrCtx = ep.run(ctx)
		logger.Info("serving the copy to Kafka clients", "listen", ep.status.Address, "advertised", ep.status.Advertised,
			"node_id", ep.status.NodeID, "cluster_id", ep.status.ClusterID)
	}
	runErr := mgr.Run(mgrCtx) // returns after ctx ends (and the server has stopped), logs flushed and closed
	if ep != nil {
		if err := ep.wait(); err != nil && runErr == nil {
			runErr = err
		}
	}
	<-progDone
	shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		srv.Close()
	}
	if err := <-httpDone; err != nil && !errors.Is(err, http.ErrServerClosed) && runErr == nil {
		runErr = fmt.Errorf("HTTP server: %w", err)
	}
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
		// The fetcher's maintenance tick flushes every --flush-interval and
		// times each fsync (kfollower_flush_duration_seconds); storage's own
		// flush on append, after four intervals without one, is a backstop
		// for a worker too busy to tick.
		o.Flush = storage.FlushInterval
		o.FlushInterval = 4 * cfg.FlushInterval
	default:
		o.Flush = storage.FlushOS
	}
	return o
}

func partitions(ss []fetcher.Status) []metrics.Partition {
	out := make([]metrics.Partition, len(ss))
	for i, s := range ss {
		out[i] = metrics.Partition{
			Topic: s.Topic, Partition: s.Partition, State: s.State,
			Leader: s.Leader, LeaderEpoch: s.LeaderEpoch, LocalEpoch: s.LocalEpoch,
			LogStartOffset: s.LogStartOffset, LogEndOffset: s.LogEndOffset,
			HighWatermark: s.HighWatermark, Lag: s.Lag, Reconciled: s.Reconciled,
			SizeBytes: s.SizeBytes, Segments: s.Segments,
		}
	}
	return out
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

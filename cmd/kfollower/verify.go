package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/kfollower/kfollower/audit"
)

func init() {
	register(&command{name: "verify", summary: "compare the local copy with the current leaders, batch by batch (exit 1 on a divergence)", run: runVerify})
}

func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := newAuditCLI("verify", stdout, stderr, true, "comma-separated `topics` to verify (default: every topic in --data-dir)")
	parallel := a.fs.Int("parallel", 4, "partitions verified at once")
	a.doc = `Usage: kfollower verify --bootstrap-servers host:port --data-dir DIR [flags]

Compares the local copy of each partition in the data dir with its current
leader: for every local batch, base offset, last offset, partition leader
epoch and CRC, fetched as a consumer. Reports the verified range, the first
divergence, and whether the local leader-epoch sequence is a prefix of the
leader's. Reads the data dir only, so it can run beside 'kfollower run'.

Exit status: 0 all match, 1 a divergence, 2 usage or connection errors
(the cluster is asked first, so an unreachable one is never "all match").

Example:
  kfollower verify --bootstrap-servers kafka:9092 --data-dir /var/lib/kfollower --topic orders
`
	parts, code := a.start(args)
	if code >= 0 {
		return code
	}
	cl, err := a.connect(ctx)
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
	if len(rep.Partitions) == 0 {
		fmt.Fprintf(stderr, "kfollower verify: nothing to verify: no partition in %s\n", a.cfg.DataDir)
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

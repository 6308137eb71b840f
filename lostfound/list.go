package lostfound

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kfollower/kfollower/storage"
)

// ListOptions select lost+found events.
type ListOptions struct {
	// DataDir is the kfollower data dir (required); it is only read.
	DataDir string
	// Topics and Partitions narrow the list; empty means all.
	Topics     []string
	Partitions []int32
}

// Event is one saved range: storage.Lost (the content of lost.json)
// plus the directory holding it.
type Event struct {
	storage.Lost
	Dir string `json:"dir"`
	// ClusterLoss says whether the batches are committed data the cluster
	// lost (storage.Lost.ClusterLoss: by cause), which Replay replays by
	// default, rather than history kfollower dropped (discarded-on-gap).
	ClusterLoss bool `json:"clusterLoss"`
}

// ListReport is the result of List. Its exported fields are its JSON
// form.
type ListReport struct {
	Events []Event `json:"events"`
}

// ExitCode is 0, success: a listing finds nothing to disagree with (a
// failure is List's error instead).
func (r *ListReport) ExitCode() int { return 0 }

// List lists the lost+found events under DataDir
// (storage.LostFoundDir: lost+found/<topic>-<partition>/<first>-<end>[.n]/
// lost.json), ordered by partition and offset.
func List(opts ListOptions) (*ListReport, error) {
	if opts.DataDir == "" {
		return nil, errors.New("lost: no data dir")
	}
	root := filepath.Join(opts.DataDir, "lost+found")
	parts, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return &ListReport{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", root, err)
	}
	rep := &ListReport{}
	for _, pd := range parts {
		tp, ok := storage.ParsePartitionDir(pd.Name())
		if !pd.IsDir() || !ok ||
			(len(opts.Topics) > 0 && !slices.Contains(opts.Topics, tp.Topic)) ||
			(len(opts.Partitions) > 0 && !slices.Contains(opts.Partitions, tp.Partition)) {
			continue
		}
		ranges, err := os.ReadDir(filepath.Join(root, pd.Name()))
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", filepath.Join(root, pd.Name()), err)
		}
		for _, rd := range ranges {
			dir := filepath.Join(root, pd.Name(), rd.Name())
			// An event is written as <event>.tmp and renamed complete: any
			// other name is a save in progress or one a crash interrupted.
			if !rd.IsDir() || !storage.IsLostEventName(rd.Name()) {
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, "lost.json")); errors.Is(err, os.ErrNotExist) {
				continue // SaveLost writes lost.json last: an interrupted save
			}
			l, err := storage.ReadLost(dir)
			if err != nil {
				return nil, fmt.Errorf("reading lost+found event %s: %w", dir, err)
			}
			rep.Events = append(rep.Events, Event{Lost: l, Dir: dir, ClusterLoss: l.ClusterLoss()})
		}
	}
	slices.SortFunc(rep.Events, func(a, b Event) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition),
			cmp.Compare(a.FirstOffset, b.FirstOffset), a.SavedAt.Compare(b.SavedAt), strings.Compare(a.Dir, b.Dir))
	})
	return rep, nil
}

// WriteTable renders one line per event.
func (r *ListReport) WriteTable(w io.Writer) error {
	if len(r.Events) == 0 {
		_, err := fmt.Fprintln(w, "no lost+found events")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tOFFSETS\tCAUSE\tEPOCHS\tBATCHES\tRECORDS\tBYTES\tSAVED\tDIR\t")
	for _, e := range r.Events {
		var eps []string
		for _, le := range e.Epochs {
			eps = append(eps, fmt.Sprintf("%d:[%d..%d]", le.Epoch, le.FirstOffset, le.LastOffset))
		}
		fmt.Fprintf(tw, "%s-%d\t[%d..%d]\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t\n", e.Topic, e.Partition, e.FirstOffset, e.LastOffset,
			causeText(e.Lost), strings.Join(eps, " "), e.Batches, e.Records, e.Bytes, e.SavedAt.UTC().Format(time.RFC3339), e.Dir)
	}
	return tw.Flush()
}

// causeText is an event's cause for a table: "-" for a lost.json from a
// kfollower before the field (cluster loss), "(not cluster loss)" added to
// a cause Replay leaves out by default.
func causeText(l storage.Lost) string {
	c := cmp.Or(l.Cause, "-")
	if !l.ClusterLoss() {
		c += " (not cluster loss)"
	}
	return c
}

package storage

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
)

// unreportedName lists the losses whose truncation is durable but whose
// report the owner has not confirmed (MarkReported): Kafka's checkpoint
// framing, "0\n<n>\n" then one event ID a line. It exists only while the
// list is not empty.
const unreportedName = "kfollower-unreported-losses"

func formatUnreported(ids []string) []byte {
	b := fmt.Appendf(nil, "0\n%d\n", len(ids))
	for _, id := range ids {
		b = fmt.Appendf(b, "%s\n", id)
	}
	return b
}

func parseUnreported(data []byte) ([]string, error) {
	lines := splitLines(string(data))
	if len(lines) < 2 || lines[0] != "0" {
		return nil, fmt.Errorf("unreported losses %q: want version 0 and a count", data)
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return nil, fmt.Errorf("unreported losses %q: count does not match", data)
	}
	ids := lines[2:]
	for _, id := range ids {
		if !IsLostEventName(id) {
			return nil, fmt.Errorf("unreported losses %q: %q is not an event name", data, id)
		}
	}
	return ids, nil
}

// UnreportedLosses lists, oldest first, the losses whose truncation is
// durable and whose report the owner has not yet confirmed with
// MarkReported: the ones TruncateWithLost returned since, and after Open
// the ones a crash left unreported, whether Open's recovery completed
// their truncation or the previous process died before MarkReported.
//
// This is how a loss is reported exactly once across restarts, given the
// owner's part: report each loss (log, count, /status), then MarkReported
// its ID; after Open, do the same for every entry here. A crash between
// the report and MarkReported's fsync repeats that one report after the
// restart, with the same Lost.ID: at least once, never lost, and a repeat
// is recognisable by its ID.
func (l *Log) UnreportedLosses() []Lost {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clone(l.unreported)
}

// MarkReported records durably that the loss id (Lost.ID) was reported, so
// that UnreportedLosses after a restart leaves it out. An ID not in the
// list is ignored. On an error the loss stays listed and the call can be
// repeated; the log itself is unharmed.
func (l *Log) MarkReported(id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	i := slices.IndexFunc(l.unreported, func(x Lost) bool { return x.ID == id })
	if i < 0 {
		return nil
	}
	rest := slices.Delete(slices.Clone(l.unreported), i, i+1)
	if err := l.writeUnreported(rest); err != nil {
		return fmt.Errorf("marking loss %s of %s reported: %w", id, l.tp(), err)
	}
	l.unreported = rest
	return nil
}

// addUnreported records lost as a loss to report, before the intent that
// named it goes. It is idempotent, so Open can redo it.
func (l *Log) addUnreported(lost Lost) error {
	if slices.ContainsFunc(l.unreported, func(x Lost) bool { return x.ID == lost.ID }) {
		return nil
	}
	list := append(slices.Clone(l.unreported), lost)
	if err := l.writeUnreported(list); err != nil {
		return err
	}
	l.unreported = list
	return nil
}

func (l *Log) writeUnreported(list []Lost) error {
	if len(list) == 0 {
		return removeFileSynced(l.fsys, l.dir, unreportedName)
	}
	ids := make([]string, len(list))
	for i, x := range list {
		ids[i] = x.ID
	}
	return writeFileAtomic(l.fsys, l.dir, unreportedName, formatUnreported(ids))
}

// loadUnreported reads the list at Open, and each loss's lost.json. An
// event an operator has removed from lost+found since is dropped with a
// warning; a list that does not parse (kfollower writes it atomically) is
// ignored with a warning, and rewritten at the next change.
func (l *Log) loadUnreported() error {
	path := filepath.Join(l.dir, unreportedName)
	data, err := l.fsys.ReadFile(path)
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	ids, err := parseUnreported(data)
	if err != nil {
		l.lg.Warn("ignoring an unreadable list of unreported losses", "err", err)
		return nil
	}
	dropped := false
	for _, id := range ids {
		lost, err := readLost(l.fsys, filepath.Join(LostFoundDir(l.dataDir, l.topic, l.partition), id))
		if err != nil {
			l.lg.Warn("an unreported loss is no longer in lost+found; not reporting it", "id", id, "err", err)
			dropped = true
			continue
		}
		l.unreported = append(l.unreported, lost)
	}
	if dropped {
		return l.writeUnreported(l.unreported)
	}
	return nil
}

package storage

import (
	"fmt"
	"strings"
)

const intentName = "kfollower-truncation-intent"

// intent is a truncation recorded durably before any segment is touched,
// so that a crash halfway cannot bring truncated batches or epochs back:
// Open finishes it before anything else. Its file is
//
//	0
//	<to|full> <offset>
//	lost <event>            only when the truncation saves what it removes
//
// kind "to" (TruncateTo) or "full" (TruncateFullyAndStartAt). <event> names
// the lost+found event directory of TruncateWithLost: its copy of the
// removed batches, lost.json included, is complete and durable under the
// name <event>.tmp before the intent is written, so Open can always rename
// it into place and report the loss (docs/storage-format.md §7).
type intent struct {
	full   bool
	offset int64
	lost   string
}

func (in intent) String() string {
	s := fmt.Sprintf("to %d", in.offset)
	if in.full {
		s = fmt.Sprintf("full %d", in.offset)
	}
	if in.lost != "" {
		s += ", lost " + in.lost
	}
	return s
}

func formatIntent(in intent) []byte {
	kind := "to"
	if in.full {
		kind = "full"
	}
	b := fmt.Appendf(nil, "0\n%s %d\n", kind, in.offset)
	if in.lost != "" {
		b = fmt.Appendf(b, "lost %s\n", in.lost)
	}
	return b
}

func parseIntent(data []byte) (intent, error) {
	lines := splitLines(string(data))
	if (len(lines) != 2 && len(lines) != 3) || lines[0] != "0" {
		return intent{}, fmt.Errorf("truncation intent %q: want version 0 and one or two lines", data)
	}
	kind, off, ok := strings.Cut(lines[1], " ")
	n, err := parseJavaInt(off, 64)
	if !ok || err != nil || n < 0 || (kind != "to" && kind != "full") {
		return intent{}, fmt.Errorf("truncation intent %q: bad line", data)
	}
	in := intent{full: kind == "full", offset: n}
	if len(lines) == 3 {
		word, name, ok := strings.Cut(lines[2], " ")
		if !ok || word != "lost" || !IsLostEventName(name) {
			return intent{}, fmt.Errorf("truncation intent %q: bad lost line", data)
		}
		in.lost = name
	}
	return in, nil
}

package storage

import (
	"fmt"
	"strings"
)

const intentName = "kfollower-truncation-intent"

// intent is a truncation recorded durably before any segment is touched,
// so that a crash halfway cannot bring truncated batches or epochs back:
// Open finishes it before anything else.
// Its file is "0\n<kind> <offset>\n", kind "to" (TruncateTo) or "full"
// (TruncateFullyAndStartAt).
type intent struct {
	full   bool
	offset int64
}

func formatIntent(in intent) []byte {
	kind := "to"
	if in.full {
		kind = "full"
	}
	return fmt.Appendf(nil, "0\n%s %d\n", kind, in.offset)
}

func parseIntent(data []byte) (intent, error) {
	lines := splitLines(string(data))
	if len(lines) != 2 || lines[0] != "0" {
		return intent{}, fmt.Errorf("truncation intent %q: want version 0 and one line", data)
	}
	kind, off, ok := strings.Cut(lines[1], " ")
	n, err := parseJavaInt(off, 64)
	if !ok || err != nil || n < 0 || (kind != "to" && kind != "full") {
		return intent{}, fmt.Errorf("truncation intent %q: bad line", data)
	}
	return intent{full: kind == "full", offset: n}, nil
}

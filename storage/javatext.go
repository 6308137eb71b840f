package storage

import (
	"fmt"
	"strconv"
	"strings"
)

// The small files are read with the rules of Kafka's own readers
// (BufferedReader.readLine, Pattern.split("\\s+"), Long.parseLong), so a
// file Kafka accepts parses here and one it rejects fails here.

// splitLines splits as BufferedReader.readLine does: "\n", "\r" and "\r\n"
// end a line, and a final line without a terminator still counts.
func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	return out
}

// splitJavaWhitespace mimics Pattern.compile("\\s+").split(line): leading
// whitespace yields an empty first field (and so a malformed line);
// trailing empty fields are dropped.
func splitJavaWhitespace(l string) []string {
	isWS := func(r byte) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\x0b' || r == '\f' || r == '\r' }
	var out []string
	start := 0
	for i := 0; i < len(l); {
		if !isWS(l[i]) {
			i++
			continue
		}
		out = append(out, l[start:i])
		for i < len(l) && isWS(l[i]) {
			i++
		}
		start = i
	}
	out = append(out, l[start:])
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// parseJavaInt accepts what Integer.parseInt / Long.parseLong accept for
// ASCII input: an optional sign and decimal digits, nothing else.
func parseJavaInt(s string, bits int) (int64, error) {
	digits := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if len(s)-len(digits) > 1 || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, fmt.Errorf("not a number: %q", s)
	}
	return strconv.ParseInt(s, 10, bits)
}

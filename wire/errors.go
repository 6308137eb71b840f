package wire

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrorName is a Kafka error code's name as the protocol spells it (e.g.
// FENCED_LEADER_EPOCH), NONE for 0, and UNKNOWN_ERROR_CODE_<n> for a code
// kerr does not know, so that a newer broker's error is still told apart.
// The fetcher's metric labels and the probe's evidence use it alike.
func ErrorName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e := kerr.TypedErrorForCode(code); e != nil {
		return e.Message
	}
	return fmt.Sprintf("UNKNOWN_ERROR_CODE_%d", code)
}

package audit

// Exit codes shared by every tool (issue 6): cmd/kfollower passes them to
// os.Exit.
const (
	// ExitOK: everything compared matches.
	ExitOK = 0
	// ExitMismatch: a divergence was found (verify, lineage).
	ExitMismatch = 1
	// ExitError: usage or connection errors, or a partition that could not
	// be checked.
	ExitError = 2
)

// UsageError is a bad combination of options; cmd prints it with the
// usage text.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// ExitCodeFor maps an error returned by a tool (rather than a report) to
// an exit code: ExitOK for nil, ExitError otherwise. A report's own
// ExitCode says whether it found a divergence.
func ExitCodeFor(err error) int {
	if err == nil {
		return ExitOK
	}
	return ExitError
}

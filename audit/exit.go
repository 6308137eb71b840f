package audit

// Exit codes of the tools, the same for each, so that a script or a CI job
// can tell a finding (1: the cluster and the copy disagree) from a check
// that could not be made (2), as diff(1) and cmp(1) do. cmd/kfollower passes
// them to os.Exit, for the lost commands too.
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

//go:build !linux

package storage

import "io"

// sendfile is not used off Linux: Section.Send copies through a buffer.
func sendfile(io.Writer, file, int64, int) (bool, error) { return false, nil }

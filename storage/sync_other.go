//go:build !linux

package storage

import "os"

// fdatasync falls back to a full fsync where fdatasync is missing. (On
// darwin a durable flush would need F_FULLFSYNC; kfollower targets Linux.)
func fdatasync(f *os.File) error { return f.Sync() }

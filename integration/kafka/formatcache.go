package kafka

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// formatAll formats every node's data directory with StorageTool, under one
// cluster id. StorageTool is a JVM each, about 1 s of CPU, so formatting a
// 4-node cluster cost 2 s of every cluster start on 2 cores, and CI starts
// about 70 clusters. What it writes depends only on the release, each
// node's id and roles, and the features (meta.properties; the bootstrap
// metadata snapshot under __cluster_metadata-0 of a controller holds the
// feature levels; no port or path), so the first cluster of each shape is
// formatted by StorageTool and its data directories kept in cache (beside
// the jars); later ones copy them. Clusters of one shape then share a cluster id and
// directory ids, which is harmless: one runs at a time (the machine-wide
// cluster lock, held here) and each in a new directory.
func formatAll(cache, version string, nodes []*Node, features []string) error {
	entry := filepath.Join(cache, formatKey(version, nodes, features))
	if _, err := os.Stat(filepath.Join(entry, "complete")); err == nil {
		for _, n := range nodes {
			src := filepath.Join(entry, fmt.Sprintf("node%d", n.ID))
			if err := copyTree(src, n.DataDir()); err != nil {
				return fmt.Errorf("formatting node %d from %s: %w", n.ID, src, err)
			}
		}
		return nil
	}
	id := newClusterID()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.format(id, features) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Kept for the next cluster of this shape: built aside and renamed
	// into place, so an interrupted copy is never taken for a whole one.
	// A failure here costs only the next cluster's time.
	tmp := entry + ".tmp"
	os.RemoveAll(tmp)
	if os.MkdirAll(tmp, 0o755) != nil {
		return nil
	}
	for _, n := range nodes {
		if err := copyTree(n.DataDir(), filepath.Join(tmp, fmt.Sprintf("node%d", n.ID))); err != nil {
			os.RemoveAll(tmp)
			return nil
		}
	}
	os.RemoveAll(entry) // an incomplete one
	if os.WriteFile(filepath.Join(tmp, "complete"), []byte(id+"\n"), 0o644) != nil || os.Rename(tmp, entry) != nil {
		os.RemoveAll(tmp)
	}
	return nil
}

// formatKey names a cluster's shape: what StorageTool's output depends on.
func formatKey(version string, nodes []*Node, features []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", version)
	for _, n := range nodes {
		fmt.Fprintf(&b, "node %d broker=%t controller=%t\n", n.ID, n.broker, n.controller)
	}
	for _, f := range features {
		fmt.Fprintf(&b, "feature %s\n", f)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return version + "-" + hex.EncodeToString(sum[:8])
}

// copyTree copies the regular files and directories under src to dst,
// with their modes.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case info.Mode().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, info.Mode().Perm())
		default:
			return fmt.Errorf("%s: not a regular file or directory", path)
		}
	})
}

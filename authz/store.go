package authz

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// Store is an Authorizer over the rules in force, which Set replaces at
// any time; safe for concurrent use. A Store without rules denies.
type Store struct {
	rules atomic.Pointer[Rules]
}

// Set puts r in force.
func (s *Store) Set(r *Rules) { s.rules.Store(r) }

// Rules is the rules in force, nil before the first Set.
func (s *Store) Rules() *Rules { return s.rules.Load() }

func (s *Store) Authorize(principal, host string, op Operation, rt ResourceType, name string) bool {
	r := s.rules.Load()
	return r != nil && r.Authorize(principal, host, op, rt, name)
}

// File keeps a Store's rules in step with an ACL file. Reload reads it
// again; a file that fails to parse leaves the rules in force as they
// were. Safe for concurrent use.
type File struct {
	path  string
	store *Store

	mu  sync.Mutex
	sum [sha256.Size]byte // of the content in force
	bad [sha256.Size]byte // of the last content rejected
	err error             // why bad was rejected; nil once a good file loads
}

// LoadFile reads path into a new Store; an invalid file is an error.
func LoadFile(path string) (*File, error) {
	f := &File{path: path, store: &Store{}}
	if _, err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Store is the Authorizer the file feeds.
func (f *File) Store() *Store { return f.store }

// Path is the ACL file's path.
func (f *File) Path() string { return f.path }

// Reload reads the file and, if its content changed and every entry is
// valid, puts the new rules in force. changed reports a new set of rules;
// an error (the file unreadable, or each invalid entry with file and line)
// means the old rules stay. The same invalid content is reported once:
// reloading it again returns no error, and Err still gives it.
func (f *File) Reload() (changed bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := os.ReadFile(f.path)
	if err != nil {
		return false, fmt.Errorf("reading ACL file: %w", err)
	}
	sum := sha256.Sum256(b)
	if f.store.Rules() != nil && bytes.Equal(sum[:], f.sum[:]) {
		f.err = nil
		return false, nil
	}
	if f.err != nil && bytes.Equal(sum[:], f.bad[:]) {
		return false, nil
	}
	r, err := ParseACLs(f.path, b)
	if err != nil {
		f.bad, f.err = sum, err
		return false, err
	}
	f.sum, f.err = sum, nil
	f.store.Set(r)
	return true, nil
}

// Err is why the file's current content is not in force, nil when it is.
func (f *File) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

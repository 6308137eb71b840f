package authz

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
)

// Operation is an ACL operation (AclOperation); only those a reader of
// this copy can be granted or denied.
type Operation int8

const (
	// All is AclOperation.ALL: every operation.
	All Operation = iota + 1
	// Read is AclOperation.READ: Fetch; it implies Describe.
	Read
	// Describe is AclOperation.DESCRIBE: Metadata, ListOffsets,
	// OffsetForLeaderEpoch.
	Describe
)

func (o Operation) String() string {
	switch o {
	case All:
		return "ALL"
	case Read:
		return "READ"
	case Describe:
		return "DESCRIBE"
	}
	return fmt.Sprintf("Operation(%d)", int8(o))
}

// ResourceType is an ACL resource type (ResourceType).
type ResourceType int8

const (
	Topic ResourceType = iota + 1
	Group
	Cluster
)

func (r ResourceType) String() string {
	switch r {
	case Topic:
		return "TOPIC"
	case Group:
		return "GROUP"
	case Cluster:
		return "CLUSTER"
	}
	return fmt.Sprintf("ResourceType(%d)", int8(r))
}

// ClusterName is the name of the one CLUSTER resource (Resource.CLUSTER_NAME).
const ClusterName = "kafka-cluster"

// Pattern is how an entry's name matches (PatternType).
type Pattern int8

const (
	// Literal matches the name exactly, or every name when it is "*".
	Literal Pattern = iota + 1
	// Prefixed matches every name that starts with it.
	Prefixed
)

func (p Pattern) String() string {
	if p == Prefixed {
		return "PREFIXED"
	}
	return "LITERAL"
}

// Permission is ALLOW or DENY (AclPermissionType).
type Permission int8

const (
	Allow Permission = iota + 1
	Deny
)

func (p Permission) String() string {
	if p == Deny {
		return "DENY"
	}
	return "ALLOW"
}

// Wildcard is the literal name, principal and host that match every one.
const Wildcard = "*"

// Entry is one ACL: Permission for Principal from Host to do Op on the
// resources of Type that Name matches under Pattern.
type Entry struct {
	Permission Permission
	Principal  string // "User:<name>" or "User:*"
	Host       string // an IP address or "*"
	Op         Operation
	Type       ResourceType
	Pattern    Pattern
	Name       string
}

func (e Entry) String() string {
	return fmt.Sprintf("%s %s %s %s %s %s host=%s", e.Permission, e.Principal, e.Op, e.Type, e.Pattern, e.Name, e.Host)
}

// Authorizer answers whether principal, connected from host, may do op on
// the resource of type rt named name.
type Authorizer interface {
	Authorize(principal, host string, op Operation, rt ResourceType, name string) bool
}

// Rules is a fixed set of ACL entries; it is an Authorizer, safe for
// concurrent use.
type Rules struct {
	entries []Entry
}

// NewRules checks entries and returns their rules.
func NewRules(entries []Entry) (*Rules, error) {
	for i, e := range entries {
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("entry %d (%s): %w", i, e, err)
		}
	}
	return &Rules{entries: append([]Entry(nil), entries...)}, nil
}

// Entries is a copy of the rules' entries.
func (r *Rules) Entries() []Entry { return append([]Entry(nil), r.entries...) }

func (e Entry) check() error {
	switch {
	case e.Permission != Allow && e.Permission != Deny:
		return errors.New("permission must be ALLOW or DENY")
	case e.Op != All && e.Op != Read && e.Op != Describe:
		return errors.New("operation must be READ, DESCRIBE or ALL")
	case e.Type != Topic && e.Type != Group && e.Type != Cluster:
		return errors.New("resource type must be TOPIC, GROUP or CLUSTER")
	case e.Pattern != Literal && e.Pattern != Prefixed:
		return errors.New("pattern type must be LITERAL or PREFIXED")
	case e.Name == "":
		return errors.New("empty resource name")
	case e.Pattern == Prefixed && e.Name == Wildcard:
		return errors.New("a PREFIXED name cannot be * (use LITERAL *)")
	case e.Type == Cluster && (e.Pattern != Literal || e.Name != ClusterName):
		return fmt.Errorf("a CLUSTER entry names LITERAL %s", ClusterName)
	case !strings.HasPrefix(e.Principal, "User:") || len(e.Principal) == len("User:"):
		return errors.New(`principal must be "User:<name>" or "User:*"`)
	case e.Host != Wildcard && net.ParseIP(e.Host) == nil:
		return errors.New(`host must be an IP address or "*"`)
	}
	return nil
}

// Authorize is AclAuthorizer.authorizeAction over the entries: a matching
// DENY wins, then a matching ALLOW grants, and no match denies.
func (r *Rules) Authorize(principal, host string, op Operation, rt ResourceType, name string) bool {
	allowed := false
	for _, e := range r.entries {
		if !e.matches(principal, host, rt, name) {
			continue
		}
		switch e.Permission {
		case Deny:
			// A DENY matches its own operation or ALL only: denying READ
			// does not deny DESCRIBE (AclAuthorizer.matchingAclExists).
			if e.Op == op || e.Op == All {
				return false
			}
		case Allow:
			// ALLOW READ implies ALLOW DESCRIBE (AclAuthorizer's
			// allowOps for DESCRIBE: READ, WRITE, DELETE, ALTER).
			if e.Op == op || e.Op == All || op == Describe && e.Op == Read {
				allowed = true
			}
		}
	}
	return allowed
}

func (e Entry) matches(principal, host string, rt ResourceType, name string) bool {
	if e.Type != rt || e.Principal != principal && e.Principal != "User:"+Wildcard {
		return false
	}
	if e.Host != Wildcard && e.Host != host {
		return false
	}
	if e.Pattern == Prefixed {
		return strings.HasPrefix(name, e.Name)
	}
	return e.Name == name || e.Name == Wildcard
}

// ParseACLs parses an ACL file: one entry a line,
//
//	PERMISSION PRINCIPAL OPERATION RESOURCE-TYPE PATTERN-TYPE NAME [HOST]
//
// for example "ALLOW User:alice READ TOPIC PREFIXED orders-", keywords in
// any case, HOST "*" when left out; blank lines and lines starting with #
// are skipped. Every invalid line is an error naming file and line, and
// then no rules are returned.
func ParseACLs(file string, data []byte) (*Rules, error) {
	var entries []Entry
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		e, err := parseEntry(strings.Fields(text))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", file, line, err))
			continue
		}
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", file, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Rules{entries: entries}, nil
}

var (
	permissions = map[string]Permission{"ALLOW": Allow, "DENY": Deny}
	operations  = map[string]Operation{"ALL": All, "READ": Read, "DESCRIBE": Describe}
	types       = map[string]ResourceType{"TOPIC": Topic, "GROUP": Group, "CLUSTER": Cluster}
	patterns    = map[string]Pattern{"LITERAL": Literal, "PREFIXED": Prefixed}
)

func parseEntry(f []string) (Entry, error) {
	if len(f) != 6 && len(f) != 7 {
		return Entry{}, fmt.Errorf("%d fields, want PERMISSION PRINCIPAL OPERATION RESOURCE-TYPE PATTERN-TYPE NAME [HOST]", len(f))
	}
	e := Entry{Principal: f[1], Name: f[5], Host: Wildcard}
	var ok bool
	if e.Permission, ok = permissions[strings.ToUpper(f[0])]; !ok {
		return e, fmt.Errorf("permission %q: want ALLOW or DENY", f[0])
	}
	if e.Op, ok = operations[strings.ToUpper(f[2])]; !ok {
		return e, fmt.Errorf("operation %q: want READ, DESCRIBE or ALL", f[2])
	}
	if e.Type, ok = types[strings.ToUpper(f[3])]; !ok {
		return e, fmt.Errorf("resource type %q: want TOPIC, GROUP or CLUSTER", f[3])
	}
	if e.Pattern, ok = patterns[strings.ToUpper(f[4])]; !ok {
		return e, fmt.Errorf("pattern type %q: want LITERAL or PREFIXED", f[4])
	}
	if len(f) == 7 {
		e.Host = f[6]
	}
	return e, e.check()
}

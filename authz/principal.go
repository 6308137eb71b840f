package authz

import (
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Anonymous is the principal of a connection that did not authenticate
// (KafkaPrincipal.ANONYMOUS).
const Anonymous = "User:ANONYMOUS"

// User is the principal of an authenticated user name.
func User(name string) string { return "User:" + name }

// Mapper maps a client certificate's subject to a user name, as Kafka's
// SslPrincipalMapper applies ssl.principal.mapping.rules.
type Mapper struct {
	rules []mappingRule
}

type mappingRule struct {
	isDefault   bool
	full        *regexp.Regexp // the pattern anchored at both ends: Matcher.matches
	re          *regexp.Regexp // the pattern itself: String.replaceAll
	replacement string
	lower       bool
	upper       bool
}

// ParseMappingRules parses a comma-separated rule list, as
// SslPrincipalMapper's RULE_SPLITTER reads it: DEFAULT, or
// RULE:pattern/replacement/ with an optional L or U, where a pattern or
// replacement may hold backslash escapes (and commas). Empty: DEFAULT
// alone, Kafka's default.
func ParseMappingRules(s string) (*Mapper, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		s = "DEFAULT"
	}
	m := &Mapper{}
	for s != "" {
		var r mappingRule
		var err error
		whole := s
		if r, s, err = parseRule(s); err != nil {
			return nil, fmt.Errorf("principal mapping rules %q: %w", whole, err)
		}
		m.rules = append(m.rules, r)
		s = strings.TrimSpace(s)
		if s != "" {
			rest, ok := strings.CutPrefix(s, ",")
			if !ok {
				return nil, fmt.Errorf("principal mapping rules %q: want a comma before %q", whole, s)
			}
			s = strings.TrimSpace(rest)
		}
	}
	return m, nil
}

// parseRule parses the rule at the start of s and returns what follows.
func parseRule(s string) (mappingRule, string, error) {
	if rest, ok := strings.CutPrefix(s, "DEFAULT"); ok {
		return mappingRule{isDefault: true}, rest, nil
	}
	rest, ok := strings.CutPrefix(s, "RULE:")
	if !ok {
		return mappingRule{}, "", fmt.Errorf("%q: want DEFAULT or RULE:pattern/replacement/[LU]", s)
	}
	// upTo is the text before the next unescaped '/'.
	upTo := func(s string) (string, string, bool) {
		for i := 0; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '/':
				return s[:i], s[i+1:], true
			}
		}
		return "", "", false
	}
	pattern, rest, ok1 := upTo(rest)
	repl, rest, ok2 := upTo(rest)
	if !ok1 || !ok2 {
		return mappingRule{}, "", fmt.Errorf("%q: want RULE:pattern/replacement/[LU]", s)
	}
	r := mappingRule{replacement: javaReplacement(repl)}
	switch {
	case strings.HasPrefix(rest, "L"):
		r.lower, rest = true, rest[1:]
	case strings.HasPrefix(rest, "U"):
		r.upper, rest = true, rest[1:]
	}
	var err error
	if r.full, err = regexp.Compile(`^(?:` + pattern + `)$`); err != nil {
		return mappingRule{}, "", fmt.Errorf("%q: %v", pattern, err)
	}
	r.re = regexp.MustCompile(pattern)
	return r, rest, nil
}

// javaReplacement turns a java.util.regex replacement ($1, \$) into a Go
// one (${1}, $$).
func javaReplacement(r string) string {
	var b strings.Builder
	for i := 0; i < len(r); i++ {
		switch c := r[i]; {
		case c == '\\' && i+1 < len(r):
			if r[i+1] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(r[i+1])
			}
			i++
		case c == '$':
			j := i + 1
			for j < len(r) && r[j] >= '0' && r[j] <= '9' {
				j++
			}
			b.WriteString("${" + r[i+1:j] + "}")
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ErrNoMatchingRule is a subject no rule maps (SslPrincipalMapper.NoMatchingRule).
var ErrNoMatchingRule = errors.New("no principal mapping rule applies")

// Name maps a distinguished name (RFC 2253, as X500Principal.getName
// gives it) to a user name.
func (m *Mapper) Name(dn string) (string, error) {
	for _, r := range m.rules {
		if r.isDefault {
			return dn, nil
		}
		if !r.full.MatchString(dn) {
			continue
		}
		name := r.re.ReplaceAllString(dn, r.replacement)
		switch {
		case r.lower:
			name = strings.ToLower(name)
		case r.upper:
			name = strings.ToUpper(name)
		}
		return name, nil
	}
	return "", fmt.Errorf("%w to %q", ErrNoMatchingRule, dn)
}

// Principal is the principal of a client certificate: User:<mapped name>.
func (m *Mapper) Principal(cert *x509.Certificate) (string, error) {
	name, err := m.Name(cert.Subject.String())
	if err != nil {
		return "", err
	}
	return User(name), nil
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// What every command's flags share: Kafka's own spellings as aliases
// (kafka-console-consumer.sh --bootstrap-server, kafka-topics.sh --topic),
// help in double-dash form, and a short message with the nearest flag on a
// typo instead of the whole usage.

// aliasValue marks a flag that is another name of the flag of: it sets the
// same value and is listed with it, not on its own line.
type aliasValue struct {
	flag.Value
	of string
}

// alias registers name as another spelling of the flag canonical.
func alias(fs *flag.FlagSet, name, canonical string) {
	f := fs.Lookup(canonical)
	if f == nil {
		panic("kfollower: alias " + name + " of undefined flag " + canonical)
	}
	fs.Var(aliasValue{f.Value, canonical}, name, "same as --"+canonical)
}

// aliasesOf returns the aliases of each flag of fs, by canonical name.
func aliasesOf(fs *flag.FlagSet) map[string][]string {
	out := map[string][]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if a, ok := f.Value.(aliasValue); ok {
			out[a.of] = append(out[a.of], f.Name)
		}
	})
	return out
}

// printFlags lists fs's flags as flag.PrintDefaults does, with the double
// dashes the docs use, each alias beside its flag.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	aliases := aliasesOf(fs)
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := f.Value.(aliasValue); ok {
			return
		}
		name, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "  --%s", f.Name)
		for _, a := range aliases[f.Name] {
			fmt.Fprintf(&b, ", --%s", a)
		}
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		switch f.DefValue {
		case "", "0", "false", "0s":
			// flag.PrintDefaults leaves zero defaults out too.
		default:
			if g, ok := f.Value.(flag.Getter); ok {
				if _, str := g.Get().(string); str {
					fmt.Fprintf(&b, " (default %q)", f.DefValue)
					break
				}
			}
			fmt.Fprintf(&b, " (default %s)", f.DefValue)
		}
		b.WriteString("\n")
	})
	io.WriteString(w, b.String())
}

// quiet makes fs's Parse report errors to the caller only: it prints
// neither the error nor the usage, which the commands do themselves
// (help on stdout, a short message on a mistake).
func quiet(fs *flag.FlagSet) *flag.FlagSet {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// flagError rewrites a flag.Parse error for the command line: double
// dashes, and for an unknown flag the nearest defined one.
func flagError(fs *flag.FlagSet, err error) error {
	const undefined = "flag provided but not defined: -"
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, undefined); ok {
		msg = "unknown flag --" + name
		if near := nearestFlag(fs, name); near != "" {
			msg += "; did you mean --" + near + "?"
		}
		return errors.New(msg)
	}
	// "invalid value "x" for flag -name: ..." and "flag needs an
	// argument: -name".
	msg = strings.Replace(msg, "for flag -", "for flag --", 1)
	msg = strings.Replace(msg, "argument: -", "argument: --", 1)
	return errors.New(msg)
}

// nearestFlag is the defined flag closest to name by edit distance, if it
// is close enough to be a typo of it, or one name is a prefix of the other.
func nearestFlag(fs *flag.FlagSet, name string) string {
	best, bestD := "", 0
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	canonical := func(n string) string {
		if a, ok := fs.Lookup(n).Value.(aliasValue); ok {
			return a.of
		}
		return n
	}
	sort.Strings(names)
	for _, n := range names {
		d := editDistance(name, n)
		if strings.HasPrefix(n, name) || strings.HasPrefix(name, n) {
			d = min(d, 1)
		}
		if best == "" || d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" || bestD > max(2, len(name)/3) {
		return ""
	}
	return canonical(best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Command kfollower attaches to a running Apache Kafka cluster as a shadow
// replica of the topics it is told to follow. See `kfollower --help`.
//
// Each subcommand lives in its own file and registers itself with register
// from an init function, so adding one (verify, lineage, lost) touches no
// other file.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // a runtime failure, or input that flags cannot catch (a file, the cluster)
	exitUsage = 2 // bad command line: unknown flag or subcommand, bad value
)

// command is one subcommand.
type command struct {
	name    string
	summary string // one line for the top-level help
	// run executes the command with the arguments after its name. ctx ends
	// on SIGINT or SIGTERM.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = map[string]*command{}

// register adds a subcommand; called from init functions.
func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("kfollower: subcommand registered twice: " + c.name)
	}
	commands[c.name] = c
}

func main() {
	// The first SIGINT or SIGTERM cancels ctx for a graceful shutdown;
	// stopping the notification on the way out lets a second one kill.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr, stop)
	stop()
	os.Exit(code)
}

// dispatch runs the subcommand args[0]. onStop, if not nil, is called once
// the command has started shutting down, so a second signal is not caught.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer, onStop func()) int {
	if onStop != nil {
		go func() {
			<-ctx.Done()
			onStop()
		}()
	}
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitOK
	case "--version", "-version", "-V":
		return runVersion(ctx, nil, stdout, stderr)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "kfollower: unknown command %q", args[0])
		if near := nearestCommand(args[0]); near != "" {
			fmt.Fprintf(stderr, "; did you mean %q?", near)
		}
		fmt.Fprint(stderr, "\nUsage: kfollower <command> [flags]\nRun 'kfollower --help' for the commands.\n")
		return exitUsage
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

// nearestCommand is the command closest to name, if close enough to be a
// typo of it.
func nearestCommand(name string) string {
	best, bestD := "", 0
	for n := range commands {
		if d := editDistance(name, n); best == "" || d < bestD || d == bestD && n < best {
			best, bestD = n, d
		}
	}
	if bestD > max(1, len(name)/3) {
		return ""
	}
	return best
}

func usage(w io.Writer) {
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("kfollower: a shadow replica of Kafka partitions that reports exactly what committed data the cluster lost.\n\n")
	b.WriteString("Usage:\n  kfollower <command> [flags]\n\nCommands:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-10s %s\n", n, commands[n].summary)
	}
	b.WriteString("\nRun 'kfollower <command> --help' for a command's flags and examples; 'kfollower --version' for the version.\n")
	io.WriteString(w, b.String())
}

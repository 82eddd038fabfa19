package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

// Exit statuses, the same for every command, as Fortio and the Go flag
// package use them; `meshperf help` and the README document them.
const (
	exitOK       = 0 // done (help included)
	exitFailed   = 1 // the command ran and failed: a run, a server, a refused or unanswered request, a regression found
	exitBadInput = 2 // the command line or an input file was wrong; nothing was started
)

// exitStatusHelp is the paragraph of `meshperf help` on exit statuses.
const exitStatusHelp = "exit status: 0 done; 1 failed (a run, a server, or a request the control plane refused or did not answer;\n" +
	"for compare, history and perfcheck, a significant regression); 2 bad input (flags, arguments or files), reported\n" +
	"on one line before anything starts."

// usageError is a bad flag or argument: exit status 2, and its line points
// at the command's -h.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// inputError is input that cannot be used (a file that cannot be read or
// decoded, a value the flags' types let through but the command refuses):
// exit status 2, and its message already says where the problem is.
type inputError struct{ err error }

func (e inputError) Error() string { return e.err.Error() }
func (e inputError) Unwrap() error { return e.err }

// exitStatus prints err as the command's one line on stderr and returns
// the exit status it stands for: exitOK for nil and for flag.ErrHelp (the
// help was printed), exitBadInput for a usageError or inputError,
// exitFailed for anything else.
func exitStatus(stderr io.Writer, name string, err error) int {
	var ue usageError
	var ie inputError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		_, _ = fmt.Fprintf(stderr, "%s: %v (see %s -h)\n", name, err, name)
		return exitBadInput
	case errors.As(err, &ie):
		_, _ = fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitBadInput
	}
	_, _ = fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return exitFailed
}

// untilSignalled runs a command that runs until stopped, with a context
// that ends on SIGINT or SIGTERM. Each such command installs the handler
// itself, not Main: the lab lets a second Ctrl-C through (labContext).
func untilSignalled(run func(context.Context, []string, io.Writer, io.Writer) int, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, stdout, stderr)
}

// command is one command's line: its flags, its help, and how its errors
// end it. Every meshperf command (and sub-command) is parsed by one, so
// that -h, a bad flag and a missing argument look and exit the same
// everywhere.
type command struct {
	name     string // "meshperf get": the help's usage line and every message start with it
	synopsis string // what follows the name in the usage line: "[flags] KIND [NAME]"
	about    string // what the command does, under the usage line
	flags    *flag.FlagSet
}

// newCommand returns a command with an empty flag set for the caller to
// define its flags on.
func newCommand(name, synopsis, about string) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported as one line by exitStatus
	fs.Usage = func() {}
	return &command{name: name, synopsis: synopsis, about: about, flags: fs}
}

// parse reads args and returns the positional arguments. Flags may come
// before, between or after them, as kubectl allows (`get vs reviews -n
// bookinfo`); everything after "--" is positional. -h prints the help to
// stdout and returns flag.ErrHelp; a bad flag or value is a usageError.
func (c *command) parse(args []string, stdout io.Writer) ([]string, error) {
	var positional []string
	for {
		err := c.flags.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			c.printHelp(stdout)
			return nil, err
		}
		if err != nil {
			return nil, usageError{err.Error()}
		}
		rest := c.flags.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// parseFlagsOnly is parse for a command that takes no positional argument.
func (c *command) parseFlagsOnly(args []string, stdout io.Writer) error {
	rest, err := c.parse(args, stdout)
	if err == nil && len(rest) > 0 {
		err = usagef("unexpected argument %q: %s takes only flags", rest[0], c.name)
	}
	return err
}

func (c *command) printHelp(w io.Writer) {
	printUsage(w, c.flags, strings.TrimSpace(c.name+" "+c.synopsis), c.about)
}

// exit prints err as the command's one line and returns its exit status.
func (c *command) exit(stderr io.Writer, err error) int { return exitStatus(stderr, c.name, err) }

// subcommand is one entry of a commandGroup.
type subcommand struct {
	name    string
	aliases []string // other spellings, not listed in the help (-version)
	about   string   // one line for the group's help
	run     func(args []string) int
	hidden  bool // not in the group's help: a process images run, not a user
}

// commandGroup is a command made of subcommands: meshperf itself, meshperf
// lab, meshperf cpload. Without a subcommand it prints its help to stderr
// and exits 2; -h or help prints it to stdout; `help SUB` is `SUB -h`.
type commandGroup struct {
	name  string // "meshperf lab"
	about string // the help's paragraph under the usage line
	subs  []subcommand
	notes string // a paragraph after the list of subcommands
}

func (g *commandGroup) run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		g.printHelp(stderr)
		return exitBadInput
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if args[0] == "help" && len(args) > 1 {
			if len(args) > 2 {
				return exitStatus(stderr, g.name, usagef("help takes one command, got %q too", args[2]))
			}
			return g.run([]string{args[1], "-h"}, stdout, stderr)
		}
		g.printHelp(stdout)
		return exitOK
	}
	for _, s := range g.subs {
		if s.name == args[0] || slices.Contains(s.aliases, args[0]) {
			return s.run(args[1:])
		}
	}
	_, _ = fmt.Fprintf(stderr, "%s: unknown command %q (%s help lists them)\n", g.name, args[0], g.name)
	return exitBadInput
}

func (g *commandGroup) printHelp(w io.Writer) {
	width := 0
	for _, s := range g.subs {
		if !s.hidden {
			width = max(width, len(s.name))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s COMMAND [flags]\n", g.name)
	if g.about != "" {
		b.WriteString(g.about + "\n")
	}
	b.WriteString("\ncommands:\n")
	for _, s := range g.subs {
		if !s.hidden {
			fmt.Fprintf(&b, "  %-*s  %s\n", width, s.name, s.about)
		}
	}
	if g.notes != "" {
		b.WriteString("\n" + g.notes + "\n")
	}
	fmt.Fprintf(&b, "\n%s COMMAND -h shows a command's flags.\n", g.name)
	_, _ = io.WriteString(w, b.String())
}

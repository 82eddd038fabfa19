package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestCommandParseIntersperses(t *testing.T) {
	for _, c := range []struct {
		args       []string
		positional []string
		namespace  string
	}{
		{[]string{"vs", "reviews", "-n", "bookinfo"}, []string{"vs", "reviews"}, "bookinfo"},
		{[]string{"-n", "bookinfo", "vs", "reviews"}, []string{"vs", "reviews"}, "bookinfo"},
		{[]string{"vs", "-n=bookinfo", "reviews"}, []string{"vs", "reviews"}, "bookinfo"},
		// After "--" everything is positional, dashes included.
		{[]string{"-n", "a", "--", "vs", "-n", "b"}, []string{"vs", "-n", "b"}, "a"},
		{[]string{"vs", "--", "-reviews"}, []string{"vs", "-reviews"}, ""},
	} {
		cmd := newCommand("meshperf test", "ARGS", "about")
		var ns string
		cmd.flags.StringVar(&ns, "n", "", "namespace")
		got, err := cmd.parse(c.args, &bytes.Buffer{})
		if err != nil || !slices.Equal(got, c.positional) || ns != c.namespace {
			t.Errorf("parse %q: %q, -n %q, %v; want %q, -n %q", c.args, got, ns, err, c.positional, c.namespace)
		}
	}
}

func TestCommandHelpAndBadFlags(t *testing.T) {
	cmd := newCommand("meshperf test", "[flags] ARG", "Tests.")
	var n int
	countVar(cmd.flags, &n, "count", 3, "how many")
	var stdout bytes.Buffer
	_, err := cmd.parse([]string{"-h"}, &stdout)
	want := "usage: meshperf test [flags] ARG\nTests.\n\nflags:\n  -count int\n    \thow many (default 3)\n"
	if !errors.Is(err, flag.ErrHelp) || stdout.String() != want {
		t.Errorf("-h: %v, printed\n%s\nwant\n%s", err, stdout.String(), want)
	}
	var stderr bytes.Buffer
	if code := cmd.exit(&stderr, err); code != exitOK || stderr.Len() != 0 {
		t.Errorf("after -h: exit %d, stderr %q; want 0 and nothing", code, stderr.String())
	}

	_, err = cmd.parse([]string{"-count", "-1"}, &stdout)
	stderr.Reset()
	code := cmd.exit(&stderr, err)
	if line := "meshperf test: invalid value \"-1\" for flag -count: must be 0 or more (see meshperf test -h)\n"; code != exitBadInput || stderr.String() != line {
		t.Errorf("bad value: exit %d, %q; want 2 and %q", code, stderr.String(), line)
	}
}

func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int
		line string
	}{
		{nil, exitOK, ""},
		{flag.ErrHelp, exitOK, ""},
		{usagef("-x %q: want y", "z"), exitBadInput, "meshperf test: -x \"z\": want y (see meshperf test -h)\n"},
		{fmt.Errorf("checking: %w", usagef("wrapped")), exitBadInput, "meshperf test: checking: wrapped (see meshperf test -h)\n"},
		{inputError{errors.New("a.yaml: document 2: bad")}, exitBadInput, "meshperf test: a.yaml: document 2: bad\n"},
		{errors.New("connection refused"), exitFailed, "meshperf test: connection refused\n"},
	} {
		var stderr bytes.Buffer
		if code := exitStatus(&stderr, "meshperf test", c.err); code != c.code || stderr.String() != c.line {
			t.Errorf("%v: exit %d, %q; want %d, %q", c.err, code, stderr.String(), c.code, c.line)
		}
	}
}

func TestCommandGroup(t *testing.T) {
	var ran []string
	g := commandGroup{name: "meshperf test", subs: []subcommand{
		{name: "one", aliases: []string{"-1"}, about: "the first", run: func(args []string) int {
			ran = append(ran, "one "+strings.Join(args, " "))
			return 7
		}},
	}}
	for _, c := range []struct {
		args           []string
		code           int
		stdout, stderr string
		ran            string
	}{
		{nil, exitBadInput, "", "usage: meshperf test COMMAND", ""},
		{[]string{"-h"}, exitOK, "usage: meshperf test COMMAND", "", ""},
		{[]string{"one", "a", "b"}, 7, "", "", "one a b"},
		{[]string{"-1"}, 7, "", "", "one "},
		{[]string{"help", "one"}, 7, "", "", "one -h"},
		{[]string{"help", "one", "two"}, exitBadInput, "", "meshperf test: help takes one command, got \"two\" too", ""},
		{[]string{"two"}, exitBadInput, "", "meshperf test: unknown command \"two\" (meshperf test help lists them)\n", ""},
	} {
		ran = nil
		var stdout, stderr bytes.Buffer
		code := g.run(c.args, &stdout, &stderr)
		gotRan := strings.Join(ran, ";")
		if code != c.code || !strings.HasPrefix(stdout.String(), c.stdout) || (c.stdout == "") != (stdout.Len() == 0) ||
			!strings.HasPrefix(stderr.String(), c.stderr) || (c.stderr == "") != (stderr.Len() == 0) || gotRan != c.ran {
			t.Errorf("%q: exit %d, stdout %q, stderr %q, ran %q; want %d, %q..., %q..., %q",
				c.args, code, stdout.String(), stderr.String(), gotRan, c.code, c.stdout, c.stderr, c.ran)
		}
	}
}

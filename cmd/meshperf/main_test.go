package main

import (
	"errors"
	"os/exec"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/meshperf/meshperf/internal/testutil"
)

// TestMain makes the test binary meshperf itself when the scripts run
// `meshperf`: the real main, with no separate build.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"meshperf": main})
}

// TestScripts pins meshperf's command line: every command's -h, its one-line
// errors and its exit statuses, in testdata/script/*.txtar.
//
// Besides testscript's commands the scripts have
//
//	exits STATUS PROGRAM [ARGS...]
//
// which runs PROGRAM like exec and wants exactly that exit status, since
// `! exec` cannot tell bad input (2) from a failure (1).
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		// With the project's -update (internal/testutil), a script whose
		// `cmp stdout NAME` or `cmp stderr NAME` fails has NAME rewritten in
		// its .txtar with what meshperf prints now; review the diff.
		UpdateScripts:       testutil.Update(),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Cmds:                map[string]func(ts *testscript.TestScript, neg bool, args []string){"exits": exits},
	})
}

func exits(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("! exits: name the status wanted instead")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: exits STATUS PROGRAM [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits %q: the status is not a number", args[0])
	}
	got := 0
	var exitErr *exec.ExitError
	switch err := ts.Exec(args[1], args[2:]...); {
	case errors.As(err, &exitErr):
		got = exitErr.ExitCode()
	case err != nil:
		ts.Fatalf("%s did not run: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

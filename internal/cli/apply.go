package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// Apply runs `meshperf apply -f FILE|DIR|- [-f ...] [--server URL]`: it reads
// and validates every file here, so that a mistake is reported with its file
// and document without touching the control plane, then sends all the
// objects in one request, which the control plane applies all or nothing.
// Exit status: 0 applied, 1 the control plane refused or did not answer,
// 2 bad flags or files.
func Apply(args []string, stdout, stderr io.Writer) int {
	return runApply(context.Background(), osPilotEnv(), args, stdout, stderr)
}

// Delete runs `meshperf delete -f FILE|DIR|- [-f ...] [--server URL]`:
// the objects the files name (only kind, namespace and name are read) are
// deleted in one request, all or nothing; one that does not exist fails the
// whole delete. Exit status as for Apply.
func Delete(args []string, stdout, stderr io.Writer) int {
	return runDelete(context.Background(), osPilotEnv(), args, stdout, stderr)
}

// writeCommand is the command line of apply and delete: the files naming
// the objects, and the server.
type writeCommand struct {
	*command
	files  stringsFlag
	target pilotClientFlags
}

func newWriteCommand(name, about string) *writeCommand {
	c := &writeCommand{command: newCommand(name, "-f FILE|DIR|- [-f ...] [flags]", about)}
	c.flags.Var(&c.files, "f", "a YAML or JSON `file`, a directory of them (*.yaml, *.yml, *.json) or - for standard input; repeatable")
	c.flags.Var(&c.files, "filename", "same as -f")
	c.target.define(c.flags)
	return c
}

// parse reads the command line and returns the client of the server.
func (c *writeCommand) parse(args []string, env pilotEnv, stdout io.Writer) (*api.Client, error) {
	rest, err := c.command.parse(args, stdout)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		return nil, usagef("unexpected argument %q: name the objects with -f FILE", rest[0])
	}
	if len(c.files) == 0 {
		return nil, usagef("-f FILE|DIR|- is required")
	}
	return newPilotClient(c.target, env)
}

func runApply(ctx context.Context, env pilotEnv, args []string, stdout, stderr io.Writer) int {
	cmd := newWriteCommand("meshperf apply", "Validates every object of the files here, so that a mistake is reported with its file and document\n"+
		"before anything is sent, then applies them all in one request: all or nothing, as kubectl apply -f.")
	c, err := cmd.parse(args, env, stdout)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	rs, err := config.ReadPaths(cmd.files, env.stdin)
	if err != nil {
		return cmd.exit(stderr, inputError{err})
	}
	if len(rs) == 0 {
		return cmd.exit(stderr, inputError{fmt.Errorf("no objects in %s", strings.Join(cmd.files, ", "))})
	}
	resp, err := c.ApplyResources(ctx, rs)
	if err != nil {
		return cmd.exit(stderr, pilotCallError(err))
	}
	for _, o := range resp.Objects {
		_, _ = fmt.Fprintf(stdout, "%s/%s %s\n", kubectlName(o.Kind), o.Name, o.Action)
	}
	return exitOK
}

func runDelete(ctx context.Context, env pilotEnv, args []string, stdout, stderr io.Writer) int {
	cmd := newWriteCommand("meshperf delete", "Deletes the objects the files name (only kind, namespace and name are read) in one request:\n"+
		"all or nothing, so one that does not exist fails the whole delete.")
	c, err := cmd.parse(args, env, stdout)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	keys, err := readKeys(cmd.files, env.stdin)
	if err != nil {
		return cmd.exit(stderr, inputError{err})
	}
	if len(keys) == 0 {
		return cmd.exit(stderr, inputError{fmt.Errorf("no objects in %s", strings.Join(cmd.files, ", "))})
	}
	resp, err := c.DeleteKeys(ctx, keys)
	if err != nil {
		return cmd.exit(stderr, pilotCallError(err))
	}
	for _, o := range resp.Objects {
		_, _ = fmt.Fprintf(stdout, "%s %q %s\n", kubectlName(o.Kind), o.Name, o.Action)
	}
	return exitOK
}

// readKeys reads the identities of the objects in paths, expanded as
// config.ReadPaths expands them. Specs are not decoded: a delete must work
// on a file that no longer validates.
func readKeys(paths []string, stdin io.Reader) ([]config.Key, error) {
	var keys []config.Key
	for _, p := range paths {
		files, err := config.ExpandPath(p)
		if err != nil {
			return nil, err
		}
		for _, name := range files {
			var data []byte
			if name == "-" {
				if stdin == nil {
					return nil, errors.New("-: no standard input")
				}
				name = "<stdin>"
				if data, err = io.ReadAll(stdin); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
			} else if data, err = os.ReadFile(name); err != nil {
				return nil, err
			}
			ks, err := api.DecodeKeys(name, data)
			if err != nil {
				return nil, err
			}
			keys = append(keys, ks...)
		}
	}
	return keys, nil
}

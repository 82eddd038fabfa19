package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
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
// Exit status: 0 applied, 1 the control plane refused or could not be
// reached, 2 bad flags or files.
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

// writeFlags are the flags of apply and delete.
type writeFlags struct {
	files  stringsFlag
	server string
}

func parseWriteFlags(cmd string, args []string, stdout io.Writer) (*writeFlags, bool, error) {
	f := &writeFlags{}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported as one line by the caller
	fs.Var(&f.files, "f", "a YAML or JSON `file`, a directory of them (*.yaml, *.yml, *.json) or - for standard input; repeatable")
	fs.Var(&f.files, "filename", "same as -f")
	fs.StringVar(&f.server, "server", "", "the control plane's API `URL` (default $"+pilotServerEnv+", else "+defaultPilotServer+")")
	fs.StringVar(&f.server, "s", "", "same as --server")
	rest, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		_, _ = fmt.Fprintf(stdout, "usage: %s -f FILE|DIR|- [-f ...] [--server URL]\n", cmd)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return nil, true, nil
	}
	if err != nil {
		return nil, false, usageError{err.Error()}
	}
	if len(rest) > 0 {
		return nil, false, usagef("unexpected argument %q: name the objects with -f FILE", rest[0])
	}
	if len(f.files) == 0 {
		return nil, false, usagef("-f FILE|DIR|- is required")
	}
	return f, false, nil
}

func runApply(ctx context.Context, env pilotEnv, args []string, stdout, stderr io.Writer) int {
	const cmd = "meshperf apply"
	f, help, err := parseWriteFlags(cmd, args, stdout)
	if help || err != nil {
		return exitStatus(stderr, cmd, err)
	}
	c, err := newPilotClient(cmd, f.server, env)
	if err != nil {
		return exitStatus(stderr, cmd, usageError{err.Error()})
	}
	rs, err := config.ReadPaths(f.files, env.stdin)
	if err != nil {
		return exitStatus(stderr, cmd, inputError{err})
	}
	if len(rs) == 0 {
		return exitStatus(stderr, cmd, inputError{fmt.Errorf("no objects in %s", strings.Join(f.files, ", "))})
	}
	// The objects travel in their canonical form: they were validated here,
	// and the server decodes exactly what was checked.
	var body bytes.Buffer
	for i, r := range rs {
		b, err := config.Encode(r)
		if err != nil {
			return exitStatus(stderr, cmd, inputError{err})
		}
		if i > 0 {
			body.WriteString("\n---\n")
		}
		body.Write(b)
	}
	var resp api.ApplyResponse
	if err := c.call(ctx, "POST", "/api/v1/apply", nil, body.Bytes(), &resp); err != nil {
		return exitStatus(stderr, cmd, err)
	}
	for _, o := range resp.Objects {
		_, _ = fmt.Fprintf(stdout, "%s/%s %s\n", kubectlName(o.Kind), o.Name, o.Action)
	}
	return 0
}

func runDelete(ctx context.Context, env pilotEnv, args []string, stdout, stderr io.Writer) int {
	const cmd = "meshperf delete"
	f, help, err := parseWriteFlags(cmd, args, stdout)
	if help || err != nil {
		return exitStatus(stderr, cmd, err)
	}
	c, err := newPilotClient(cmd, f.server, env)
	if err != nil {
		return exitStatus(stderr, cmd, usageError{err.Error()})
	}
	keys, err := readKeys(f.files, env.stdin)
	if err != nil {
		return exitStatus(stderr, cmd, inputError{err})
	}
	if len(keys) == 0 {
		return exitStatus(stderr, cmd, inputError{fmt.Errorf("no objects in %s", strings.Join(f.files, ", "))})
	}
	body, err := identityDocuments(keys)
	if err != nil {
		return exitStatus(stderr, cmd, err)
	}
	var resp api.DeleteResponse
	if err := c.call(ctx, "POST", "/api/v1/delete", nil, body, &resp); err != nil {
		return exitStatus(stderr, cmd, err)
	}
	for _, o := range resp.Objects {
		_, _ = fmt.Fprintf(stdout, "%s %q %s\n", kubectlName(o.Kind), o.Name, o.Action)
	}
	return 0
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

// identityDocuments is a delete request: one JSON document per key holding
// only what names it.
func identityDocuments(keys []config.Key) ([]byte, error) {
	type meta struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
	}
	type doc struct {
		Kind     config.Kind `json:"kind"`
		Metadata meta        `json:"metadata"`
	}
	var body bytes.Buffer
	for i, k := range keys {
		b, err := json.Marshal(doc{Kind: k.Kind, Metadata: meta{Name: k.Name, Namespace: k.Namespace}})
		if err != nil {
			return nil, err
		}
		if i > 0 {
			body.WriteString("\n---\n")
		}
		body.Write(b)
	}
	return body.Bytes(), nil
}

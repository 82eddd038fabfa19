package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// The control plane's API address, as `meshperf pilot` serves it by default
// (its --httpAddr), and the variable that points every client elsewhere at
// once, the way KUBECONFIG does for kubectl.
const (
	defaultPilotServer = "http://127.0.0.1:8080"
	pilotServerEnv     = "MESHPERF_SERVER"
)

// pilotRequestTimeout bounds one API call. An apply is one fsynced write, so
// even a large mesh answers in well under a second; the bound only keeps a
// wedged server from hanging a script.
const pilotRequestTimeout = time.Minute

// pilotEnv is what apply, delete and get take from the process, passed in so
// that tests can give their own.
type pilotEnv struct {
	stdin  io.Reader
	getenv func(string) string
	client *http.Client
}

func osPilotEnv() pilotEnv {
	return pilotEnv{stdin: os.Stdin, getenv: os.Getenv, client: &http.Client{Timeout: pilotRequestTimeout}}
}

// pilotClient calls the control plane's API for one command.
type pilotClient struct {
	cmd  string // "meshperf apply", to start every message
	base string // scheme://host[:port], no trailing slash
	http *http.Client
}

// newPilotClient resolves the server: the --server flag, else
// $MESHPERF_SERVER, else the default. A bare host:port means http.
func newPilotClient(cmd, server string, env pilotEnv) (*pilotClient, error) {
	if server == "" && env.getenv != nil {
		server = env.getenv(pilotServerEnv)
	}
	if server == "" {
		server = defaultPilotServer
	}
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	u, err := checkURL(server)
	if err != nil {
		return nil, fmt.Errorf("--server %q: %v; for example %s", server, err, defaultPilotServer)
	}
	c := env.client
	if c == nil {
		c = &http.Client{Timeout: pilotRequestTimeout}
	}
	return &pilotClient{cmd: cmd, base: strings.TrimSuffix(u.String(), "/"), http: c}, nil
}

// call sends one request and decodes a 2xx answer into out (skipped when out
// is nil; a *[]byte gets the raw body). Its errors are the one line to print
// after the command's name: the server's own message, or why it could not
// be reached.
func (c *pilotClient) call(ctx context.Context, method, path string, query url.Values, body []byte, out any) error {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/yaml")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its "Post URL:" prefix repeats what the message says
		}
		return fmt.Errorf("cannot reach the control plane at %s (is meshperf pilot running? --server to point elsewhere): %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading the answer of %s: %w", c.base, err)
	}
	if resp.StatusCode/100 != 2 {
		var e api.ErrorResponse
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return errors.New(e.Error)
		}
		return fmt.Errorf("the control plane at %s answered %s: %s (is --server pointing at meshperf pilot's --httpAddr?)",
			c.base, resp.Status, firstLine(data))
	}
	switch o := out.(type) {
	case nil:
	case *[]byte:
		*o = data
	default:
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("the control plane at %s sent an answer this meshperf cannot read: %w", c.base, err)
		}
	}
	return nil
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}

// parseInterspersed parses flags that may come before, between or after the
// positional arguments, as kubectl allows (`get vs reviews -n bookinfo`);
// the flag package alone stops at the first positional one. Everything
// after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
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

// stringsFlag collects a repeatable flag such as -f.
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, ",") }

func (s *stringsFlag) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// kubectlName is how kubectl names a kind in its output:
// "virtualservice.networking.istio.io", or "service" for core kinds.
func kubectlName(k config.Kind) string {
	name := strings.ToLower(string(k))
	switch k {
	case config.KindNamespace, config.KindService:
		return name
	case config.KindPeerAuthentication:
		return name + ".security.istio.io"
	}
	return name + ".networking.istio.io"
}

// usageError is a bad flag or argument: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitStatus prints err as the command's one line and returns its exit
// status: 2 for bad input, 1 for anything the server or the network did.
func exitStatus(stderr io.Writer, cmd string, err error) int {
	if err == nil {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		_, _ = fmt.Fprintf(stderr, "%s: %v (see %s -h)\n", cmd, err, cmd)
		return 2
	}
	var ie inputError
	if errors.As(err, &ie) {
		_, _ = fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return 2
	}
	_, _ = fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
	return 1
}

// inputError is a file that cannot be read or decoded: exit status 2, and
// its message already names the file and document.
type inputError struct{ err error }

func (e inputError) Error() string { return e.err.Error() }
func (e inputError) Unwrap() error { return e.err }

package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// What apply, delete and get add to api.Client: which control plane to
// call. The --server flag wins, then the variable that points every client
// elsewhere at once (the way KUBECONFIG does for kubectl), then the address
// `meshperf pilot` serves its API on by default.
const (
	defaultPilotServer = "http://" + api.DefaultAddress
	pilotServerEnv     = "MESHPERF_SERVER"
)

// pilotEnv is what apply, delete and get take from the process, passed in so
// that tests can give their own.
type pilotEnv struct {
	stdin  io.Reader
	getenv func(string) string
	client *http.Client // nil: api.NewClient's default
}

func osPilotEnv() pilotEnv {
	return pilotEnv{stdin: os.Stdin, getenv: os.Getenv}
}

// serverFlag is --server: the address, and whether it was given at all, so
// that an empty --server (an unset variable in a script) is an error
// rather than the default.
type serverFlag struct {
	value string
	given bool
}

func (f *serverFlag) String() string { return f.value }

func (f *serverFlag) Set(v string) error {
	f.value, f.given = v, true
	return nil
}

// pilotClientFlags are the flags naming the control plane and the token
// its API takes.
type pilotClientFlags struct {
	server serverFlag
	token  string
}

// define registers --server, its short form -s, and --token.
func (f *pilotClientFlags) define(fs *flag.FlagSet) {
	fs.Var(&f.server, "server", "the control plane's API `URL` (default $"+pilotServerEnv+", else "+defaultPilotServer+")")
	fs.Var(&f.server, "s", "same as --server")
	fs.StringVar(&f.token, "token", "", "the API's `token`, sent as Authorization: Bearer: what meshperf pilot printed at start, or its --api-token "+
		"(default $"+api.TokenEnv+", which keeps it off the command line; a pilot on loopback without one needs none)")
}

// newPilotClient resolves the server and the token and returns a client
// of it; an address that is no URL is a usage error naming where it came
// from.
func newPilotClient(f pilotClientFlags, env pilotEnv) (*api.Client, error) {
	server, token := f.server, f.token
	if token == "" && env.getenv != nil {
		token = env.getenv(api.TokenEnv)
	}
	addr, from := server.value, "--server"
	if !server.given && env.getenv != nil {
		addr, from = env.getenv(pilotServerEnv), "$"+pilotServerEnv
	}
	if !server.given && addr == "" {
		addr = defaultPilotServer
	}
	c, err := api.NewClient(addr, env.client, api.WithToken(token))
	if err != nil {
		return nil, usagef("%s: %v", from, err)
	}
	return c, nil
}

// pilotCallError is an api.Client error as the CLI prints it: a control
// plane that did not answer is told how to point elsewhere.
func pilotCallError(err error) error {
	var unreachable *api.UnreachableError
	if errors.As(err, &unreachable) {
		return fmt.Errorf("%w; --server or $%s to point elsewhere", err, pilotServerEnv)
	}
	return err
}

// kubectlName is how kubectl names a kind in its output:
// "virtualservice.networking.istio.io", or "service" for core kinds.
func kubectlName(k config.Kind) string {
	name := strings.ToLower(k.ManifestKind())
	if g := k.Group(); g != "" {
		return name + "." + g
	}
	return name
}

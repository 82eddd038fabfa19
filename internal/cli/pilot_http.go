package cli

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/meshperf/meshperf/internal/httpguard"
	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/inject"
)

// pilotHTTP is pilot's two HTTP servers, both behind httpguard: the API
// (config, /debug/, /ready) and monitoring (/metrics, /debug/pprof/).
type pilotHTTP struct {
	api, monitoring *http.Server
	token           string
	generated       bool // the token was made up here: announce prints it
}

// newPilotHTTP builds the servers on f's listeners. Their token is
// --api-token, else $MESHPERF_PILOT_TOKEN, else, when the API is not on
// loopback, a new one: off loopback every write needs a token. /ready and
// /metrics stay open to probes and Prometheus; /debug/ needs the token,
// as istiod's debug endpoints are loopback-only or authenticated.
func newPilotHTTP(srv *discovery.Server, f *pilotFlags, scopeLog func(string) *slog.Logger) (*pilotHTTP, error) {
	apiLn, monLn := f.listeners.get(listenerHTTP), f.listeners.get(listenerMonitoring)
	token, generated, err := serverToken(f.apiToken, os.Getenv(api.TokenEnv), apiLn.Addr())
	if err != nil {
		return nil, fmt.Errorf("the API's token: %w", err)
	}
	if token == "" && !isLoopback(monLn.Addr()) {
		scopeLog(defaultScope).Warn("the monitoring listener is not on loopback and pilot has no API token: /debug/pprof/ (profiles, the command line) is open to anyone who reaches it; "+
			"give --api-token or $"+api.TokenEnv+", or bind --monitoringAddr to loopback", "address", monLn.Addr().String())
	}
	allowed := append(append([]string(nil), f.allowedHosts...), pilotServiceNames(f)...)

	deps := apiDeps(srv, scopeLog(apiScope))
	deps.Token, deps.ListenAddress, deps.AllowedHosts = token, f.listeners.given(listenerHTTP), allowed
	mon := http.NewServeMux()
	mon.Handle("/metrics", promhttp.HandlerFor(srv.Metrics(), promhttp.HandlerOpts{}))
	// Go's profiles, as istiod serves them (on its debug port): how the
	// connect, push and disconnect paths spend CPU and memory at scale.
	mon.HandleFunc("/debug/pprof/", pprof.Index)
	mon.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mon.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mon.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mon.HandleFunc("/debug/pprof/trace", pprof.Trace)
	guardedMon := httpguard.Wrap(mon, httpguard.Options{
		AllowedHosts: allowed, BindAddress: f.listeners.given(listenerMonitoring), Token: token,
		TokenHelp: "meshperf pilot's --api-token or $" + api.TokenEnv, TokenPaths: []string{"/debug/"},
	})
	return &pilotHTTP{
		api:        &http.Server{Handler: api.NewHandler(deps), ReadHeaderTimeout: 10 * time.Second},
		monitoring: &http.Server{Handler: guardedMon, ReadHeaderTimeout: 10 * time.Second},
		token:      token, generated: generated,
	}, nil
}

// announce prints a generated token, once: the only way its user learns it.
func (p *pilotHTTP) announce(stdout io.Writer) {
	if p.generated {
		fmt.Fprintf(stdout, "meshperf pilot: the API is not on loopback, so its writes and /debug/ need this token "+
			"(Authorization: Bearer; meshperf apply, get and delete read $%s): %s\n", api.TokenEnv, p.token)
	}
}

// pilotServiceNames are the names of the pilot's Service on Kubernetes,
// which clients in the cluster put in Host; none elsewhere.
func pilotServiceNames(f *pilotFlags) []string {
	if f.kube.client == nil {
		return nil
	}
	ns := pilotNamespace()
	host := inject.ServiceHost(ns)
	return []string{inject.PilotName, inject.PilotName + "." + ns, host, host + "." + f.domain}
}

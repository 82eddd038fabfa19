package cli

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/testutil"
)

// startGuardedPilot runs meshperf pilot with its API and monitoring
// listeners on the hosts given (port 0) and returns their addresses, as
// reached over loopback, and its stdout and stderr.
func startGuardedPilot(t *testing.T, apiHost, monitoringHost string, extra ...string) (apiAddr, monAddr string, stdout, stderr *syncBuffer) {
	t.Helper()
	args := append([]string{"--dataDir", t.TempDir(), "--grpcAddr", "127.0.0.1:0", "--httpAddr", apiHost + ":0",
		"--monitoringAddr", monitoringHost + ":0"}, extra...)
	r, stdout, stderr := startCommandReady(t, runPilot, args...)
	return loopbackAddr(t, r.Listeners[listenerHTTP]), loopbackAddr(t, r.Listeners[listenerMonitoring]), stdout, stderr
}

// loopbackAddr is addr with an unspecified IP replaced by 127.0.0.1.
func loopbackAddr(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// statusOf GETs url with the headers given and returns the status.
func statusOf(t *testing.T, url string, headers map[string]string) int {
	t.Helper()
	code, _ := testutil.Send(t, http.MethodGet, url, "", headers)
	return code
}

// runPilotClient runs apply, get or delete against server with the
// environment's token given, and returns its exit status and stderr.
func runPilotClient(t *testing.T, cmd cliRun, envToken, stdin string, args ...string) (int, string) {
	t.Helper()
	env := pilotEnv{stdin: strings.NewReader(stdin), getenv: func(name string) string {
		if name == api.TokenEnv {
			return envToken
		}
		return ""
	}}
	var out, errOut bytes.Buffer
	code := cmd(context.Background(), env, args, &out, &errOut)
	return code, errOut.String()
}

// tokenPrinted is the token a server printed on stdout after prefix, and
// how many times it printed one.
func tokenPrinted(stdout, prefix string) (token string, times int) {
	for _, line := range strings.Split(stdout, "\n") {
		if _, tok, ok := strings.Cut(line, prefix); ok {
			token, times = tok, times+1
		}
	}
	return token, times
}

const pilotTokenLine = "meshperf pilot: the API is not on loopback, so its writes and /debug/ need this token " +
	"(Authorization: Bearer; meshperf apply, get and delete read $MESHPERF_PILOT_TOKEN): "

// Off loopback pilot makes up a token and prints it once; apply and delete
// need it (from --token or the environment), get does not, and neither do
// /ready and /metrics; /debug/ of both listeners does.
func TestPilotOffLoopbackRequiresItsToken(t *testing.T) {
	t.Setenv(api.TokenEnv, "")
	apiAddr, monAddr, stdout, _ := startGuardedPilot(t, "0.0.0.0", "127.0.0.1")
	token, times := tokenPrinted(stdout.String(), pilotTokenLine)
	if len(token) != 32 || times != 1 {
		t.Fatalf("stdout %q: want the generated token printed once", stdout.String())
	}
	server := "http://" + apiAddr

	code, stderr := runPilotClient(t, runApply, "", applyBookinfo, "-f", "-", "--server", server)
	if code != exitFailed || !strings.Contains(stderr, "POST /api/v1/apply needs this server's token") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("apply without the token: exit %d, stderr %q; want 1 and one line saying the token is needed", code, stderr)
	}
	if code, stderr := runPilotClient(t, runApply, "wrong", applyBookinfo, "-f", "-", "--server", server); code != exitFailed {
		t.Errorf("apply with a wrong token: exit %d, stderr %q; want 1", code, stderr)
	}
	if code, stderr := runPilotClient(t, runGet, "", "", "vs", "-A", "--server", server); code != exitOK {
		t.Errorf("get without the token: exit %d, stderr %q; want reads open", code, stderr)
	}
	if code, stderr := runPilotClient(t, runApply, "", applyBookinfo, "-f", "-", "--server", server, "--token", token); code != exitOK {
		t.Errorf("apply with --token: exit %d, stderr %q", code, stderr)
	}
	if code, stderr := runPilotClient(t, runDelete, token, applyBookinfo, "-f", "-", "--server", server); code != exitOK {
		t.Errorf("delete with $%s: exit %d, stderr %q", api.TokenEnv, code, stderr)
	}

	bearer := map[string]string{"Authorization": "Bearer " + token}
	for _, c := range []struct {
		url     string
		headers map[string]string
		want    int
	}{
		{server + "/ready", nil, http.StatusOK},
		{"http://" + monAddr + "/metrics", nil, http.StatusOK},
		{server + "/debug/syncz", nil, http.StatusUnauthorized},
		{server + "/debug/syncz", bearer, http.StatusOK},
		{"http://" + monAddr + "/debug/pprof/cmdline", nil, http.StatusUnauthorized},
		{"http://" + monAddr + "/debug/pprof/cmdline", bearer, http.StatusOK},
	} {
		if got := statusOf(t, c.url, c.headers); got != c.want {
			t.Errorf("GET %s (headers %v) = %d, want %d", c.url, c.headers, got, c.want)
		}
	}
}

// A token given is used and not printed; a monitoring listener off
// loopback with no token at all is named in one warning line.
func TestPilotTokenFromTheEnvironmentAndTheMonitoringWarning(t *testing.T) {
	t.Setenv(api.TokenEnv, "from-the-env")
	apiAddr, _, stdout, stderr := startGuardedPilot(t, "0.0.0.0", "127.0.0.1")
	if strings.Contains(stdout.String(), "from-the-env") || strings.Contains(stderr.String(), "from-the-env") {
		t.Errorf("the token given was printed: stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	if code, out := runPilotClient(t, runApply, "from-the-env", applyRatings, "-f", "-", "--server", "http://"+apiAddr); code != exitOK {
		t.Errorf("apply with the environment's token: exit %d, stderr %q", code, out)
	}

	t.Setenv(api.TokenEnv, "")
	_, monAddr, stdout, stderr := startGuardedPilot(t, "127.0.0.1", "0.0.0.0")
	if _, times := tokenPrinted(stdout.String(), pilotTokenLine); times != 0 {
		t.Errorf("a pilot whose API is on loopback printed a token: %q", stdout.String())
	}
	if n := strings.Count(stderr.String(), "the monitoring listener is not on loopback and pilot has no API token"); n != 1 {
		t.Errorf("stderr %q: want one warning naming the monitoring listener, got %d", stderr.String(), n)
	}
	if got := statusOf(t, "http://"+monAddr+"/debug/pprof/cmdline", nil); got != http.StatusOK {
		t.Errorf("pprof on a pilot without a token = %d, want 200 (what the warning says)", got)
	}
}

// Both listeners answer only to the pilot's own names and --allowed-hosts.
func TestPilotRefusesForeignHosts(t *testing.T) {
	apiAddr, monAddr, _, _ := startGuardedPilot(t, "127.0.0.1", "127.0.0.1", "--allowed-hosts", "pilot.example.com")
	for _, c := range []struct {
		url, host string
		want      int
	}{
		{"http://" + apiAddr + "/api/v1/resources/vs", "evil.test", http.StatusForbidden},
		{"http://" + monAddr + "/metrics", "evil.test", http.StatusForbidden},
		{"http://" + apiAddr + "/api/v1/resources/vs", "pilot.example.com", http.StatusOK},
		{"http://" + monAddr + "/metrics", "pilot.example.com:15014", http.StatusOK},
	} {
		if got := statusOf(t, c.url, map[string]string{"Host": c.host}); got != c.want {
			t.Errorf("GET %s with Host %s = %d, want %d", c.url, c.host, got, c.want)
		}
	}
}

// A plaintext xDS port other hosts reach is said once at start: whoever
// reaches it registers workloads by their claim.
func TestPilotWarnsOfPlaintextXDSOffLoopback(t *testing.T) {
	const warning = "plaintext xDS is not on loopback"
	_, _, _, stderr := startGuardedPilot(t, "127.0.0.1", "127.0.0.1")
	if strings.Contains(stderr.String(), warning) {
		t.Errorf("a pilot with xDS on loopback warned: %q", stderr.String())
	}
	_, _, _, stderr = startGuardedPilot(t, "127.0.0.1", "127.0.0.1", "--grpcAddr", "0.0.0.0:0")
	if n := strings.Count(stderr.String(), warning); n != 1 {
		t.Errorf("stderr %q: want one warning naming plaintext xDS off loopback, got %d", stderr.String(), n)
	}
}

package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/store"
)

const applyBookinfo = `apiVersion: v1
kind: Namespace
metadata: {name: bookinfo}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: bookinfo}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: bookinfo}
spec:
  host: reviews
  subsets:
  - {name: v1, labels: {version: v1}}
`

const applyRatings = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ratings}
spec: {host: ratings}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec: {mtls: {mode: STRICT}}
`

// pilotAPI is an in-process control plane API over a temporary store, and
// the count of requests it received.
type pilotAPI struct {
	url      string
	db       *store.DB
	requests atomic.Int64
	env      pilotEnv
}

func startPilotAPI(t *testing.T) *pilotAPI {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "config.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	p := &pilotAPI{db: db}
	h := api.NewHandler(api.Deps{Store: db, Writer: db, Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	p.env = pilotEnv{getenv: func(string) string { return "" }, client: srv.Client()}
	return p
}

type cliRun func(ctx context.Context, env pilotEnv, args []string, stdout, stderr io.Writer) int

// run runs a command with stdin and returns its exit status and output.
func (p *pilotAPI) run(t *testing.T, cmd cliRun, stdin string, args ...string) (int, string, string) {
	t.Helper()
	env := p.env
	env.stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	code := cmd(context.Background(), env, append(args, "--server", p.url), &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func storedKeys(db *store.DB) []string {
	var out []string
	for _, k := range config.Kinds {
		for _, r := range db.List(k, "") {
			out = append(out, r.Key().String())
		}
	}
	return out
}

// oneLine checks that s is exactly one line and returns it trimmed.
func oneLine(t *testing.T, s string) string {
	t.Helper()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
		t.Errorf("want exactly one line, got %q", s)
	}
	return strings.TrimSpace(s)
}

func TestApplyFile(t *testing.T) {
	p := startPilotAPI(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"bookinfo.yaml": applyBookinfo})
	code, out, errOut := p.run(t, runApply, "", "-f", filepath.Join(dir, "bookinfo.yaml"))
	if code != 0 || errOut != "" {
		t.Fatalf("apply: exit %d, stderr %q", code, errOut)
	}
	want := "namespace/bookinfo created\n" +
		"virtualservice.networking.istio.io/reviews created\n" +
		"destinationrule.networking.istio.io/reviews created\n"
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
	if p.requests.Load() != 1 || p.db.Revision() != 1 {
		t.Errorf("%d requests, revision %d: want one request, one write", p.requests.Load(), p.db.Revision())
	}

	// Again, with the long flag after the file and a change to one object.
	writeFiles(t, dir, map[string]string{"bookinfo.yaml": strings.Replace(applyBookinfo, "version: v1", "version: v1a", 1)})
	code, out, errOut = p.run(t, runApply, "", "--filename", filepath.Join(dir, "bookinfo.yaml"))
	if code != 0 {
		t.Fatalf("re-apply: exit %d, stderr %q", code, errOut)
	}
	want = "namespace/bookinfo unchanged\n" +
		"virtualservice.networking.istio.io/reviews unchanged\n" +
		"destinationrule.networking.istio.io/reviews configured\n"
	if out != want {
		t.Errorf("re-apply stdout:\n%s\nwant:\n%s", out, want)
	}
}

func TestApplyDirectoryAndStdin(t *testing.T) {
	p := startPilotAPI(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a-bookinfo.yaml": applyBookinfo,
		"b-ratings.yml":   applyRatings,
		"notes.txt":       "not config, and not read",
	})
	code, out, errOut := p.run(t, runApply, "", "-f", dir)
	if code != 0 {
		t.Fatalf("apply dir: exit %d, stderr %q", code, errOut)
	}
	if n := strings.Count(out, " created\n"); n != 5 {
		t.Errorf("apply dir: %d objects created, want 5:\n%s", n, out)
	}
	if !strings.Contains(out, "peerauthentication.security.istio.io/default created") {
		t.Errorf("apply dir output lacks the PeerAuthentication:\n%s", out)
	}
	want := []string{"Namespace/bookinfo", "VirtualService/bookinfo/reviews", "DestinationRule/bookinfo/reviews",
		"DestinationRule/default/ratings", "PeerAuthentication/istio-system/default"}
	if got := storedKeys(p.db); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("stored %v, want %v", got, want)
	}

	// Standard input, mixed with a file, still one atomic request.
	before := p.requests.Load()
	stdin := "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: details}\nspec: {host: details}\n"
	code, out, errOut = p.run(t, runApply, stdin, "-f", "-", "-f", filepath.Join(dir, "b-ratings.yml"))
	if code != 0 {
		t.Fatalf("apply stdin: exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out, "destinationrule.networking.istio.io/details created") ||
		!strings.Contains(out, "destinationrule.networking.istio.io/ratings unchanged") {
		t.Errorf("apply stdin output:\n%s", out)
	}
	if got := p.requests.Load() - before; got != 1 {
		t.Errorf("apply of two sources made %d requests, want 1", got)
	}
}

func TestApplyBadInputSendsNothing(t *testing.T) {
	p := startPilotAPI(t)
	dir := t.TempDir()
	bad := applyBookinfo + "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: x}\nspec: {host: x, trafficPolicy: {loadBalancer: {simple: FASTEST}}}\n"
	writeFiles(t, dir, map[string]string{"bad.yaml": bad, "syntax.yaml": "kind: [\n", "good.yaml": applyRatings})
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"invalid field", []string{"-f", filepath.Join(dir, "good.yaml"), "-f", filepath.Join(dir, "bad.yaml")},
			[]string{"bad.yaml: document 4 (DestinationRule default/x)", "loadBalancer"}},
		{"bad YAML", []string{"-f", filepath.Join(dir, "syntax.yaml")}, []string{"syntax.yaml: document 1", "YAML"}},
		{"directory with a bad file", []string{"-f", dir}, []string{"bad.yaml: document 4"}},
		{"missing file", []string{"-f", filepath.Join(dir, "nope.yaml")}, []string{"nope.yaml", "no such file"}},
		{"no -f", nil, []string{"-f FILE|DIR|- is required"}},
		{"positional argument", []string{"bookinfo.yaml"}, []string{`unexpected argument "bookinfo.yaml"`}},
		{"unknown flag", []string{"--force"}, []string{"flag provided but not defined: -force"}},
		{"empty stdin", []string{"-f", "-"}, []string{"no objects in -"}},
	} {
		code, out, errOut := p.run(t, runApply, "", c.args...)
		line := oneLine(t, errOut)
		if code != 2 || out != "" {
			t.Errorf("%s: exit %d, stdout %q; want 2 and nothing", c.name, code, out)
		}
		if !strings.HasPrefix(line, "meshperf apply: ") {
			t.Errorf("%s: %q does not start with the command", c.name, line)
		}
		for _, w := range c.want {
			if !strings.Contains(line, w) {
				t.Errorf("%s: %q does not mention %q", c.name, line, w)
			}
		}
	}
	if n := p.requests.Load(); n != 0 {
		t.Errorf("bad input reached the server: %d requests", n)
	}
}

func TestDeleteFile(t *testing.T) {
	p := startPilotAPI(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"bookinfo.yaml": applyBookinfo, "ratings.yaml": applyRatings})
	if code, _, errOut := p.run(t, runApply, "", "-f", dir); code != 0 {
		t.Fatalf("apply: %s", errOut)
	}
	code, out, errOut := p.run(t, runDelete, "", "-f", filepath.Join(dir, "ratings.yaml"))
	if code != 0 {
		t.Fatalf("delete: exit %d, stderr %q", code, errOut)
	}
	want := "destinationrule.networking.istio.io \"ratings\" deleted\n" +
		"peerauthentication.security.istio.io \"default\" deleted\n"
	if out != want {
		t.Errorf("delete stdout:\n%s\nwant:\n%s", out, want)
	}
	if got := storedKeys(p.db); len(got) != 3 {
		t.Errorf("after delete: %v", got)
	}

	// A stub naming a missing object fails the whole delete: nothing goes.
	stub := "apiVersion: v1\nkind: Namespace\nmetadata: {name: bookinfo}\n---\nkind: VirtualService\nmetadata: {name: gone, namespace: bookinfo}\n"
	code, out, errOut = p.run(t, runDelete, stub, "-f", "-")
	line := oneLine(t, errOut)
	if code != 1 || out != "" || !strings.Contains(line, "VirtualService/bookinfo/gone") || !strings.Contains(line, "not found") {
		t.Errorf("delete missing: exit %d, stdout %q, stderr %q", code, out, line)
	}
	if got := storedKeys(p.db); len(got) != 3 {
		t.Errorf("a failed delete removed something: %v", got)
	}

	// Bad input stays local.
	before := p.requests.Load()
	code, _, errOut = p.run(t, runDelete, "kind: Pod\nmetadata: {name: p}\n", "-f", "-")
	if line := oneLine(t, errOut); code != 2 || !strings.Contains(line, "<stdin>: document 1") || !strings.Contains(line, `"Pod" is not supported`) {
		t.Errorf("delete of a Pod: exit %d, %q", code, line)
	}
	if p.requests.Load() != before {
		t.Error("bad delete input reached the server")
	}
}

func TestPilotServerDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"ratings.yaml": applyRatings})
	env := pilotEnv{getenv: func(k string) string {
		if k == pilotServerEnv {
			return url // the variable is honoured when --server is absent
		}
		return ""
	}}
	for name, c := range map[string]struct {
		run  cliRun
		args []string
	}{
		"meshperf apply":  {runApply, []string{"-f", filepath.Join(dir, "ratings.yaml")}},
		"meshperf delete": {runDelete, []string{"-f", filepath.Join(dir, "ratings.yaml")}},
		"meshperf get":    {runGet, []string{"virtualservices"}},
	} {
		var out, errOut bytes.Buffer
		code := c.run(context.Background(), env, c.args, &out, &errOut)
		line := oneLine(t, errOut.String())
		want := name + ": cannot reach the control plane at " + url + " (is meshperf pilot running?): "
		hint := "; --server or $" + pilotServerEnv + " to point elsewhere"
		if code != exitFailed || out.Len() != 0 || !strings.HasPrefix(line, want) || !strings.Contains(line, "refused") || !strings.HasSuffix(line, hint) {
			t.Errorf("%s with the server down: exit %d, stderr %q; want 1 and %q...%q", name, code, line, want, hint)
		}
	}
}

func TestPilotServerNotTheAPI(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>nope</html>", http.StatusBadGateway)
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	env := pilotEnv{stdin: strings.NewReader(applyRatings)}
	code := runApply(context.Background(), env, []string{"-f", "-", "-s", srv.URL}, &out, &errOut)
	line := oneLine(t, errOut.String())
	if code != 1 || !strings.Contains(line, "answered 502 Bad Gateway: <html>nope</html>") {
		t.Errorf("exit %d, %q", code, line)
	}
	code = runApply(context.Background(), env, []string{"-f", "-", "--server", "ftp://x"}, &out, &errOut)
	if code != 2 {
		t.Errorf("--server ftp://x: exit %d, want 2", code)
	}
}

func TestPilotClientHelp(t *testing.T) {
	for name, run := range map[string]cliRun{"apply": runApply, "delete": runDelete, "get": runGet} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), pilotEnv{}, []string{"-h"}, &out, &errOut); code != 0 ||
			!strings.HasPrefix(out.String(), "usage: meshperf "+name) || errOut.Len() != 0 {
			t.Errorf("%s -h: exit %d, stdout %q, stderr %q", name, code, out.String(), errOut.String())
		}
	}
}

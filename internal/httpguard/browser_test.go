package httpguard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/testenv"
	"github.com/meshperf/meshperf/internal/testutil"
)

// evilHost is the attacker's site: Chromium resolves it to loopback
// (--host-resolver-rules), so its pages and the servers share a machine
// as they do when the user runs meshperf and browses the web.
const evilHost = "evil.test"

// rebindPath is the page a rebinding forwarder serves itself; it pipes
// every other request to its target.
const rebindPath = "/rebound-attack"

// target is one browser-facing server under attack, started as a user
// starts it, and how to tell that an attack changed nothing.
type target struct {
	base      string // http://127.0.0.1:PORT
	fetchPath string // the no-cors fetch's POST
	fetchBody string
	formPath  string // the auto-submitted text/plain form's POST
	formName  string // its field's name; its value is formValue: the body is name=value
	formValue string
	writeType string // the rebound page's same-origin write: content type, path, body
	writePath string
	writeBody string
	readPath  string // the rebound page's same-origin read
	// state describes what an attack could change (live sessions, the
	// store's revision, the process): each attack must leave it as it was.
	state func() string
	// revive, when set, starts the server again if an attack stopped it,
	// so that the next attack is tried too.
	revive func()
}

// A page of another site attacks each server the way the web can: a no-cors
// fetch, an auto-submitted form with enctype=text/plain, and, through a
// rebound name, a same-origin JSON write and a read. Nothing may start,
// nothing may be applied, the sidecar must still run, and the rebound
// requests must be refused (403) where the page can see it.
func TestAWebPageCannotAttackTheServers(t *testing.T) {
	meshperf := testutil.MeshperfBinary(t)
	t.Run("dashboard", func(t *testing.T) { attack(t, startDashboard(t, meshperf)) })
	t.Run("pilot", func(t *testing.T) { attack(t, startPilot(t, meshperf)) })
	t.Run("sidecar-admin", func(t *testing.T) { attack(t, startSidecar(t, testenv.ProxyBinary(t, "../.."))) })
}

// attack runs the three attacks on tg from pages on evilHost, in a browser
// of its own, and checks after each that tg's state is what it was.
func attack(t *testing.T, tg *target) {
	pages := newAttackSite(t)
	ctx := testenv.NewBrowser(t, chromedp.Flag("host-resolver-rules", "MAP "+evilHost+" 127.0.0.1"))
	before := tg.state()
	check := func(what string) {
		t.Helper()
		if after := tg.state(); after != before {
			t.Errorf("%s changed the server: %s, was %s", what, after, before)
			if tg.revive != nil {
				tg.revive()
			}
			before = tg.state()
		}
	}

	fetchPage := pages.add(fmt.Sprintf(`<script>
fetch(%q, {method: "POST", mode: "no-cors", body: %q})
  .then(() => { window.attack = {sent: true}; }, (e) => { window.attack = {error: String(e)}; });
</script>`, tg.base+tg.fetchPath, tg.fetchBody))
	if _, err := runAttack(ctx, fetchPage); err != nil {
		t.Fatalf("the no-cors fetch page: %v", err)
	}
	check("a no-cors fetch POST " + tg.fetchPath)

	formPage := pages.add(fmt.Sprintf(`<form method="POST" enctype="text/plain" action="%s"><input type="hidden" name="%s" value="%s"></form>
<script>document.forms[0].submit();</script>`, html.EscapeString(tg.base+tg.formPath), html.EscapeString(tg.formName), html.EscapeString(tg.formValue)))
	// The submitted form navigates away, to the server's answer.
	landed := fmt.Sprintf(`location.href !== %q && document.readyState === "complete"`, formPage)
	if err := chromedp.Do(ctx, chromedp.Navigate(formPage)); err != nil {
		t.Fatalf("the form page: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](landed)); err != nil {
		t.Fatalf("the form's answer: %v", err)
	}
	check("a text/plain form POST " + tg.formPath)

	rebound := rebindingForwarder(t, strings.TrimPrefix(tg.base, "http://"), fmt.Sprintf(`<script>
(async () => {
  const read = await fetch(%q);
  const write = await fetch(%q, {method: "POST", headers: {"Content-Type": %q}, body: %q});
  window.attack = {read: read.status, write: write.status};
})().catch((e) => { window.attack = {error: String(e)}; });
</script>`, tg.readPath, tg.writePath, tg.writeType, tg.writeBody))
	got, err := runAttack(ctx, rebound)
	if err != nil {
		t.Fatalf("the rebinding page: %v", err)
	}
	if got["read"] != float64(http.StatusForbidden) || got["write"] != float64(http.StatusForbidden) {
		t.Errorf("through a rebound name: %v; want the read (GET %s) and the write (POST %s) refused with 403", got, tg.readPath, tg.writePath)
	}
	check("a same-origin write through a rebound name")
}

// runAttack loads an attack page and returns what its script reported in
// window.attack.
func runAttack(ctx context.Context, page string) (map[string]any, error) {
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		return nil, err
	}
	return chromedp.Run(ctx, chromedp.Poll[map[string]any](`window.attack`))
}

// attackSite serves the attacker's pages on evilHost.
type attackSite struct {
	mu    sync.Mutex
	pages map[string]string
	port  string
}

func newAttackSite(t *testing.T) *attackSite {
	s := &attackSite{pages: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		page, ok := s.pages[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<!doctype html><html><body>"+page+"</body></html>")
	}))
	t.Cleanup(srv.Close)
	_, s.port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return s
}

// add serves body as a new page and returns its URL on evilHost.
func (s *attackSite) add(body string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	path := "/page" + strconv.Itoa(len(s.pages))
	s.pages[path] = body
	return "http://" + evilHost + ":" + s.port + path
}

// rebindingForwarder simulates DNS rebinding on one port: a request for
// rebindPath gets the attack page (and the connection closes, so the
// page's own requests open new ones); every other connection is piped
// byte for byte to target. The page thus shares an origin with target,
// which sees Host: evil.test:PORT, as after the attacker's name was
// re-pointed at it. It returns the page's URL.
func rebindingForwarder(t *testing.T, target, page string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		open    = map[net.Conn]bool{}
		running sync.WaitGroup
	)
	// The browser keeps idle connections open: they are closed, not
	// waited for.
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		running.Wait()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open[c] = true
			mu.Unlock()
			running.Add(1)
			go func() { defer running.Done(); forward(c, target, page) }()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return "http://" + evilHost + ":" + port + rebindPath
}

func forward(c net.Conn, target, page string) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(testenv.BrowserTimeout))
	in := bufio.NewReader(c)
	line, err := in.Peek(len("GET " + rebindPath + " "))
	if err != nil {
		return
	}
	if string(line) == "GET "+rebindPath+" " {
		body := "<!doctype html><html><body>" + page + "</body></html>"
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { _, _ = io.Copy(up, in); _ = up.(*net.TCPConn).CloseWrite() }()
	_, _ = io.Copy(c, up)
}

// startDashboard runs `meshperf dashboard` on an empty results store, as a
// user does, on loopback (no token: the case a web page attacks).
func startDashboard(t *testing.T, meshperf string) *target {
	dir := t.TempDir()
	db := filepath.Join(dir, "meshperf.db")
	st, err := results.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	ready := filepath.Join(dir, "dashboard.ready")
	p, err := proc.Start(proc.Spec{Name: "meshperf dashboard", Path: meshperf, ReadyFile: ready, ParentDeathSignal: syscall.SIGKILL,
		Args: []string{"dashboard", "--db", db, "--listen", "127.0.0.1:0", "--ready-file", ready}, Env: withoutTokens()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	r, err := p.WaitReady(context.Background(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + r.Listeners["http"]
	return &target{
		base: base, fetchPath: "/api/live/start", fetchBody: `{"scenario":"quick"}`,
		// The body is {"source":"load","label":"="}: a form can send JSON.
		formPath: "/api/live", formName: `{"source":"load","label":"`, formValue: `"}`,
		writeType: "application/json", writePath: "/api/live/start", writeBody: `{"scenario":"quick"}`, readPath: "/api/runs",
		state: func() string {
			code, body := testutil.Send(t, http.MethodGet, base+"/api/live", "", nil)
			var sessions []json.RawMessage
			if err := json.Unmarshal(body, &sessions); code != http.StatusOK || err != nil {
				t.Fatalf("GET /api/live: %d %s", code, body)
			}
			runs, _ := filepath.Glob(filepath.Join(dir, "lab", "live-*"))
			return fmt.Sprintf("%d live sessions (a lab run's or a faked one), %d lab runs started", len(sessions), len(runs))
		},
	}
}

// vsAttack is the VirtualService, sending keep.example.com to the
// attacker, named for the attack that sends it.
func vsAttack(name string) string {
	return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ` + name + `, namespace: default}
spec:
  hosts: [keep.example.com]
  http:
  - route:
    - destination: {host: attacker.example.com}
`
}

// startPilot runs `meshperf pilot` on loopback (no token).
func startPilot(t *testing.T, meshperf string) *target {
	p, err := proc.StartPilot(context.Background(), proc.PilotOptions{Command: []string{meshperf, "pilot"},
		DataDir: t.TempDir(), LogLevel: "warn", Name: "meshperf pilot"}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	client, err := p.APIClient()
	if err != nil {
		t.Fatal(err)
	}
	return &target{
		base: p.APIURL(), fetchPath: "/api/v1/apply", fetchBody: vsAttack("by-fetch"),
		// The YAML ends in '#': the form's "=" and value are a comment.
		formPath: "/api/v1/apply", formName: vsAttack("by-form") + "#", formValue: "",
		writeType: "application/yaml", writePath: "/api/v1/apply", writeBody: vsAttack("by-rebinding"), readPath: "/api/v1/resources/virtualservice",
		state: func() string {
			vss, rev, err := client.List(context.Background(), config.KindVirtualService, "")
			if err != nil {
				t.Fatalf("list pilot's VirtualServices: %v", err)
			}
			return fmt.Sprintf("pilot's store at revision %d with %d VirtualServices", rev, len(vss))
		},
	}
}

// startSidecar runs meshperf-proxy with its admin on a loopback port and
// an xDS address nobody answers: unconfigured, its admin serves anyway.
func startSidecar(t *testing.T, proxy string) *target {
	admin, nobody := testutil.ClosedPort(t), testutil.ClosedPort(t)
	var p *proc.Process
	start := func() {
		var err error
		p, err = proc.Start(proc.Spec{Name: "meshperf-proxy", Path: proxy, ParentDeathSignal: syscall.SIGKILL,
			Args: []string{"--xds-address", nobody, "--admin-address", admin, "--capture-mode", "none", "--drain-duration", "0"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Stop() })
		if _, err := p.WaitListening(context.Background(), 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	start()
	return &target{
		base: "http://" + admin, fetchPath: "/quitquitquit", formPath: "/quitquitquit", formName: "x", formValue: "y",
		writeType: "application/json", writePath: "/quitquitquit", readPath: "/config_dump",
		state: func() string {
			if p.Exited() {
				return fmt.Sprintf("the sidecar exited (%s): the quitquitquit went through", p.ExitReason())
			}
			resp, err := http.Get("http://" + admin + "/ready")
			if err != nil {
				return fmt.Sprintf("the sidecar runs, but its /ready does not answer: %v", err)
			}
			resp.Body.Close()
			return "the sidecar runs and answers /ready"
		},
		revive: func() {
			if p.Exited() {
				start()
			}
		},
	}
}

// withoutTokens is this process's environment without a dashboard token,
// so that the dashboard runs as a user's on loopback does: without one.
func withoutTokens() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MESHPERF_DASHBOARD_TOKEN=") {
			env = append(env, kv)
		}
	}
	return env
}

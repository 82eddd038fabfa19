package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/testutil"
)

// formAttack is what a script-less page's form with enctype=text/plain
// sends: the YAML, then "=" and the (empty) value, which the trailing '#'
// turns into a comment.
const formAttack = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: hijack, namespace: default}
spec:
  hosts: [keep.example.com]
  http:
  - route:
    - destination: {host: attacker.example.com}
#=`

// A page of another site cannot write the mesh's config (the form
// and no-cors fetch) nor, through a rebound name, read it.
func TestTheAPIRefusesWhatAWebPageSends(t *testing.T) {
	db := newDB(t)
	srv := newServer(t, Deps{Store: db, Writer: db, ListenAddress: "pilot.internal:15016", AllowedHosts: []string{"pilot.example.com"}})
	for _, c := range []struct {
		name    string
		method  string
		path    string
		headers map[string]string
		want    int
	}{
		{"a form, enctype=text/plain", "POST", "/api/v1/apply", map[string]string{"Content-Type": "text/plain",
			"Origin": "http://evil.test", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"a form from an older browser", "POST", "/api/v1/apply", map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"a urlencoded form", "POST", "/api/v1/delete", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"a no-cors fetch", "POST", "/api/v1/apply", map[string]string{"Content-Type": "text/plain;charset=UTF-8",
			"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, http.StatusForbidden},
		{"a rebound name writing", "POST", "/api/v1/apply", map[string]string{"Content-Type": "application/yaml",
			"Host": "evil.test:15016", "Origin": "http://evil.test:15016", "Sec-Fetch-Site": "same-origin"}, http.StatusForbidden},
		{"a rebound name reading", "GET", "/api/v1/resources/virtualservice", map[string]string{"Host": "evil.test:15016"}, http.StatusForbidden},
		{"a rebound name reading debug", "GET", "/debug/syncz", map[string]string{"Host": "evil.test:15016"}, http.StatusForbidden},
	} {
		code, b := testutil.Send(t, c.method, srv.URL+c.path, formAttack, c.headers)
		if code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, b, c.want)
			continue
		}
		errorOf(t, b)
	}
	if db.Revision() != 0 {
		t.Fatalf("the store is at revision %d: a refused request wrote", db.Revision())
	}
	// The server's own names, and a client that is not a browser, are served.
	for _, host := range []string{"", "pilot.internal:15016", "PILOT.example.com", "localhost:15016"} {
		h := map[string]string{"Content-Type": "application/yaml", "Host": host}
		if code, b := testutil.Send(t, "POST", srv.URL+"/api/v1/apply", formAttack, h); code != http.StatusOK {
			t.Errorf("apply with Host %q: %d %s, want 200", host, code, b)
		}
	}
}

func TestTheTokenGuardsWritesAndDebugButNotReads(t *testing.T) {
	db := newDB(t)
	srv := newServer(t, Deps{Store: db, Writer: db, Token: "s3cret"})
	ctx := context.Background()
	anonymous := newClient(t, srv)
	if _, err := anonymous.Apply(ctx, "", []byte(formAttack)); err == nil {
		t.Fatal("apply without the token succeeded")
	} else if code, msg := statusOf(t, err); code != http.StatusUnauthorized || !strings.Contains(msg, TokenEnv) {
		t.Errorf("apply without the token: %d %q, want 401 naming %s", code, msg, TokenEnv)
	}
	if _, err := anonymous.SyncStatus(ctx); err == nil {
		t.Error("/debug/syncz without the token answered")
	}
	if err := anonymous.Ready(ctx); err != nil {
		t.Errorf("/ready without the token: %v, want it open (probes)", err)
	}
	if _, _, err := anonymous.List(ctx, config.KindVirtualService, ""); err != nil {
		t.Errorf("list without the token: %v, want reads open", err)
	}
	if db.Revision() != 0 {
		t.Fatalf("the store is at revision %d after refused writes", db.Revision())
	}

	wrong, _ := NewClient(srv.URL, nil, WithToken("s3cre"))
	if _, err := wrong.Apply(ctx, "", []byte(formAttack)); err == nil {
		t.Error("apply with a wrong token succeeded")
	}
	c, err := NewClient(srv.URL, nil, WithToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(ctx, "", []byte(formAttack)); err != nil {
		t.Errorf("apply with the token: %v", err)
	}
	if _, err := c.DeleteKeys(ctx, []config.Key{{Kind: config.KindVirtualService, Namespace: "default", Name: "hijack"}}); err != nil {
		t.Errorf("delete with the token: %v", err)
	}
	if _, err := c.SyncStatus(ctx); err != nil {
		t.Errorf("/debug/syncz with the token: %v", err)
	}
}

// A body over MaxBodyBytes is refused with one line naming the limit,
// whether it declares its length (refused before it is read) or not.
func TestEveryBodyIsBounded(t *testing.T) {
	srv, db := dbServer(t)
	// Chunked: no length declared, so the cap is met while reading.
	over := io.MultiReader(strings.NewReader(formAttack+"\n"), strings.NewReader(strings.Repeat("#", MaxBodyBytes)))
	req, _ := http.NewRequest("POST", srv.URL+"/api/v1/apply", io.NopCloser(over))
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(errorOf(t, b), fmt.Sprint(MaxBodyBytes)) || len(b) > 200 {
		t.Errorf("chunked body over the cap: %d %s (%d bytes), want 413 naming %d bytes, in one short line", resp.StatusCode, b, len(b), MaxBodyBytes)
	}

	// Declared: answered at once, though the body never comes.
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/delete HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/yaml\r\nContent-Length: %d\r\n\r\nkind: x\n", MaxBodyBytes+1)
	declared, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("a body declared over the cap got no answer before it was sent: %v", err)
	}
	declared.Body.Close()
	if declared.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("declared body over the cap: %d, want 413", declared.StatusCode)
	}
	if db.Revision() != 0 {
		t.Error("an oversized body wrote something")
	}
}

var sizeSaid = regexp.MustCompile(`\.\.\. \(1\d{4} bytes\)`)

// Errors quote a prefix of what the client sent: a 10,000-character name
// made a 20 KB answer, quoted twice.
func TestErrorsQuoteAPrefixOfWhatWasSent(t *testing.T) {
	srv, db := dbServer(t)
	long := strings.Repeat("n", 10000)
	manyHosts := "['-bad-'" + strings.Repeat(", '-bad-'", 4999) + "]"
	for _, c := range []struct {
		name, method, path, body string
		want                     int
	}{
		{"a long name", "POST", "/api/v1/apply", strings.Replace(formAttack, "name: hijack", "name: "+long, 1), 400},
		{"a long namespace", "POST", "/api/v1/apply", strings.Replace(formAttack, "namespace: default", "namespace: "+long, 1), 400},
		{"a long kind", "POST", "/api/v1/apply", strings.Replace(formAttack, "kind: VirtualService", "kind: "+long, 1), 400},
		{"a long kind to delete", "POST", "/api/v1/delete", strings.Replace(formAttack, "kind: VirtualService", "kind: "+long, 1), 400},
		// An explicit key ("? KEY"): YAML takes implicit ones of at most 1,024 characters.
		{"a long unknown field", "POST", "/api/v1/apply", strings.Replace(formAttack, "  hosts:", "  ? "+long+"\n  : 1\n  hosts:", 1), 400},
		{"a long host", "POST", "/api/v1/apply", strings.Replace(formAttack, "keep.example.com", long, 1), 400},
		{"a long file name", "POST", "/api/v1/apply?file=" + long, strings.Replace(formAttack, "name: hijack", "name: "+long, 1), 400},
		{"5,000 bad hosts", "POST", "/api/v1/apply", strings.Replace(formAttack, "[keep.example.com]", manyHosts, 1), 400},
		{"a long kind to list", "GET", "/api/v1/resources/" + long, "", 400},
		{"a long name to get", "GET", "/api/v1/resources/vs/" + long + "?namespace=" + long, "", 404},
		{"a long proxy id", "GET", "/debug/config_dump?proxyID=" + url.QueryEscape(long), "", 404},
		{"a long path", "GET", "/" + long, "", 404},
		{"a long method", strings.Repeat("M", 10000), "/api/v1/apply", "", 415},
	} {
		headers := map[string]string{}
		if c.method != "GET" {
			headers["Content-Type"] = "application/yaml"
		}
		if c.want == 415 {
			delete(headers, "Content-Type")
		}
		code, b := testutil.Send(t, c.method, srv.URL+c.path, c.body, headers)
		if code != c.want {
			t.Errorf("%s: %d %.300s, want %d", c.name, code, b, c.want)
			continue
		}
		msg := errorOf(t, b)
		if len(b) > 1500 {
			t.Errorf("%s: the answer is %d bytes (%.200s...), want at most 1,500", c.name, len(b), msg)
		}
		if strings.Contains(c.method+c.path+c.body, long) && !sizeSaid.MatchString(msg) {
			t.Errorf("%s: %.300s..., want the value's size said where its prefix is quoted", c.name, msg)
		}
	}
	if db.Revision() != 0 {
		t.Error("a refused apply wrote something")
	}
}

package xds

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/internal/netutil"
	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/testutil"
)

// newLoggedEnv is newTestEnv with opts, serving one cluster, with the
// server's log in the returned buffer.
func newLoggedEnv(t *testing.T, opts Options) (*testEnv, *testutil.SyncBuffer) {
	logged := &testutil.SyncBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logged, nil))
	return newTestEnv(t, newFakeGen("a"), opts), logged
}

// loggedLines returns the lines of buf that contain msg.
func loggedLines(buf *testutil.SyncBuffer, msg string) []string {
	var out []string
	for line := range strings.Lines(buf.String()) {
		if strings.Contains(line, msg) {
			out = append(out, line)
		}
	}
	return out
}

// A refused stream is logged with its peer and status code, whoever refused
// it (the node's validation, or a hook: authentication), and a client
// reconnecting in a loop is logged once per interval, not once per attempt.
func TestRefusedStreamsAreLoggedRateLimited(t *testing.T) {
	e, logged := newLoggedEnv(t, Options{})
	refuse := func(mutate func(c *sotwClient)) error {
		t.Helper()
		c := e.sotw(t, testCtx(t), testNode(t, ""))
		mutate(c)
		c.ask(ClusterType)
		_, err := c.stream.Recv()
		return err
	}

	const attempts = 30
	start := time.Now()
	for i := range attempts {
		err := refuse(func(c *sotwClient) {
			c.node.Id = "sidecar~not-an-ip~p-" + strings.Repeat("x", i) + ".ns~ns.svc.cluster.local"
		})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("attempt %d: %v, want InvalidArgument", i, err)
		}
	}
	elapsed := time.Since(start)
	lines := loggedLines(logged, "xds stream refused")
	// One line, or one more per interval the attempts took on a slow machine.
	if most := 1 + int(elapsed/netutil.DefaultLogInterval); len(lines) == 0 || len(lines) > most {
		t.Fatalf("%d refusals in %v logged %d lines, want 1 to %d:\n%s", attempts, elapsed, len(lines), most, logged)
	}
	for _, want := range []string{"code=InvalidArgument", "peer=127.0.0.1:", `node=sidecar~not-an-ip~p-.ns`, `IP \"not-an-ip\" is not an IP address`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("log line %q lacks %q", lines[0], want)
		}
	}

	// A hook's refusal (as authentication gives) has its own line, with its code.
	e.hooks.err = status.Error(codes.PermissionDenied, "token is for another service account")
	if err := refuse(func(*sotwClient) {}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("hook refusal: %v", err)
	}
	denied := loggedLines(logged, "code=PermissionDenied")
	if len(denied) != 1 || !strings.Contains(denied[0], "token is for another service account") || !strings.Contains(denied[0], "peer=127.0.0.1:") {
		t.Errorf("the hook's refusal was logged as %q", denied)
	}
}

// A stream whose credential fails authentication is logged with its code
// too, as every refusal in connect is.
func TestUnauthenticatedStreamIsLogged(t *testing.T) {
	e, logged := newLoggedEnv(t, Options{Authenticate: func(context.Context) (*ca.Caller, error) {
		return nil, status.Error(codes.Unauthenticated, "token expired")
	}})
	c := e.sotw(t, testCtx(t), testNode(t, ""))
	c.ask(ClusterType)
	if _, err := c.stream.Recv(); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("stream ended with %v, want Unauthenticated", err)
	}
	lines := loggedLines(logged, "xds stream refused")
	if len(lines) != 1 || !strings.Contains(lines[0], "code=Unauthenticated") || !strings.Contains(lines[0], "token expired") {
		t.Errorf("an unauthenticated stream was logged as %q", lines)
	}
}

// A node id of a megabyte is refused with an error, and a log line, that
// quote a prefix of it.
func TestHugeNodeIDIsQuotedByPrefix(t *testing.T) {
	e, logged := newLoggedEnv(t, Options{})
	c := e.sotw(t, testCtx(t), testNode(t, ""))
	c.node.Id = "sidecar~10.0.0.1~p.ns~" + strings.Repeat("d", 1<<20)
	c.ask(ClusterType)
	_, err := c.stream.Recv()
	if status.Code(err) != codes.InvalidArgument || len(err.Error()) > 2048 || !strings.Contains(err.Error(), "bytes)") {
		t.Errorf("a 1 MB node id: %d-byte error %.300s", len(err.Error()), err)
	}
	if n := len(logged.String()); n == 0 || n > 4096 {
		t.Errorf("a 1 MB node id logged %d bytes", n)
	}
}

// A request for a type the server does not serve is left unanswered, as
// before, but logged, and the stream carries on.
func TestUnservedTypeIsLoggedAndIgnored(t *testing.T) {
	e, logged := newLoggedEnv(t, Options{})
	const unserved = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"
	c := e.sotw(t, testCtx(t), testNode(t, ""))
	c.ask(unserved)
	c.ask(unserved)
	c.ask(ClusterType) // answered next: nothing was sent for the other type
	c.expect(ClusterType)
	lines := loggedLines(logged, "does not serve")
	if len(lines) != 1 || !strings.Contains(lines[0], "type="+unserved) || !strings.Contains(lines[0], "peer=127.0.0.1:") {
		t.Errorf("two requests for an unserved type logged %q, want one line naming the type and the peer", lines)
	}

	d, err := e.client.DeltaAggregatedResources(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, typeURL := range []string{unserved + "2", ClusterType} {
		if err := d.Send(&discovery.DeltaDiscoveryRequest{Node: testNode(t, ""), TypeUrl: typeURL}); err != nil {
			t.Fatal(err)
		}
	}
	if resp, err := d.Recv(); err != nil || resp.TypeUrl != ClusterType {
		t.Fatalf("delta: %v, %v; want clusters, and nothing for the unserved type", resp, err)
	}
}

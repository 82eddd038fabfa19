package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/meshperf/meshperf/internal/atomicfile"
	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/pilot/ca"
)

// PilotToken is `meshperf pilot token`: a pod's token from a running
// pilot, for a sidecar started by hand to prove its identity with
// (--auth-token), as the kubelet projects one into a pod on Kubernetes.
func PilotToken(args []string, stdout, stderr io.Writer) int {
	return runPilotToken(context.Background(), osPilotEnv(), args, stdout, stderr)
}

// pilotTokenCommand is `meshperf pilot token`'s command line.
type pilotTokenCommand struct {
	*command
	namespace, serviceAccount, pod, node, output string
	duration                                     time.Duration
	target                                       pilotClientFlags
}

func newPilotTokenCommand() *pilotTokenCommand {
	c := &pilotTokenCommand{command: newCommand("meshperf pilot token", "[flags]",
		"Asks a running meshperf pilot for a pod's token (a JWT like a Kubernetes projected service-account token, audience "+
			ca.TokenAudience+"): a proxy sends it to the CA (--ca-address) and on xDS (--auth-token FILE) to prove its identity. "+
			"Prints it, or writes it 0600 to --output.")}
	fs := c.flags
	fs.StringVar(&c.namespace, "namespace", "default", "the pod's `namespace`")
	fs.StringVar(&c.namespace, "n", "default", "same as --namespace")
	fs.StringVar(&c.serviceAccount, "service-account", "default", "the pod's service `account`: the identity the token proves")
	fs.StringVar(&c.pod, "pod", "", "the pod `name` the token is bound to: a proxy presenting it must register as that pod (default: unbound)")
	fs.StringVar(&c.node, "node", "", "the pod's node `name`, for a node proxy: it may then get certificates for the pods on that node (needs --pod)")
	durationVar(fs, &c.duration, "duration", ca.DefaultTokenLifetime,
		fmt.Sprintf("how long the token is valid, from %v to %v", ca.MinTokenLifetime, ca.MaxTokenLifetime))
	fs.StringVar(&c.output, "output", "", "write the token to this `file` (mode 0600) instead of stdout")
	fs.StringVar(&c.output, "o", "", "same as --output")
	c.target.define(fs)
	return c
}

func runPilotToken(ctx context.Context, env pilotEnv, args []string, stdout, stderr io.Writer) int {
	cmd := newPilotTokenCommand()
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	// Checked here too, so that a typo is a usage error rather than a
	// round trip; the pilot checks again.
	req := ca.TokenRequest{Identity: ca.Identity{Namespace: cmd.namespace, ServiceAccount: cmd.serviceAccount},
		Pod: cmd.pod, Node: cmd.node, Lifetime: cmd.duration}
	if err := req.Validate(); err != nil {
		return cmd.exit(stderr, usageError{err.Error()})
	}
	c, err := newPilotClient(cmd.target, env)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	resp, err := c.IssueToken(ctx, api.TokenRequest{Namespace: cmd.namespace, ServiceAccount: cmd.serviceAccount,
		Pod: cmd.pod, Node: cmd.node, ExpirationSeconds: int64(cmd.duration / time.Second)})
	if err != nil {
		return cmd.exit(stderr, pilotCallError(err))
	}
	if cmd.output == "" {
		_, _ = fmt.Fprintln(stdout, resp.Token)
		return exitOK
	}
	// No newline, as the kubelet writes a projected token.
	if err := atomicfile.Write(cmd.output, []byte(resp.Token), 0o600); err != nil {
		return cmd.exit(stderr, fmt.Errorf("--output: %w", err))
	}
	_, _ = fmt.Fprintf(stderr, "meshperf pilot token: %s/%s token written to %s, valid until %s\n",
		cmd.namespace, cmd.serviceAccount, cmd.output, resp.ExpirationTimestamp.Format(time.RFC3339))
	return exitOK
}

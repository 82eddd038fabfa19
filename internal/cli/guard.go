package cli

import (
	"flag"
	"net"
	"strings"

	"github.com/meshperf/meshperf/internal/httpguard"
)

// allowedHostsFlag is --allowed-hosts: names the browser-facing servers
// (dashboard, pilot) answer to besides IP addresses, localhost and the
// name they are bound to. Read at parse time, so a URL or host:port given
// by mistake is a usage error.
type allowedHostsFlag struct{ p *[]string }

// allowedHostsVar registers --allowed-hosts.
func allowedHostsVar(fs *flag.FlagSet, p *[]string) {
	fs.Var(allowedHostsFlag{p}, "allowed-hosts", "further host `names` to answer to, separated by commas: a request's Host must be an IP address, localhost, "+
		"the name in the listen address, or one of these, which refuses DNS rebinding; * for any, behind a proxy that rewrites Host")
}

func (f allowedHostsFlag) String() string {
	if f.p == nil {
		return ""
	}
	return strings.Join(*f.p, ",")
}

func (f allowedHostsFlag) Set(s string) error {
	hosts, err := httpguard.ParseAllowedHosts(s)
	if err != nil {
		return err
	}
	*f.p = append(*f.p, hosts...)
	return nil
}

// serverToken is the token a server requires of writes: the flag's, else
// the environment variable's, else, when addr is not loopback, a new one
// (generated says so, for printing once); on loopback with neither, none.
func serverToken(flagValue, envValue string, addr net.Addr) (token string, generated bool, err error) {
	if flagValue != "" {
		return flagValue, false, nil
	}
	if envValue != "" {
		return envValue, false, nil
	}
	if isLoopback(addr) {
		return "", false, nil
	}
	token, err = httpguard.NewToken()
	return token, err == nil, err
}

// isLoopback says whether a listener's address is on loopback only.
func isLoopback(addr net.Addr) bool {
	a, ok := addr.(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// Package hosts resolves names from a file in /etc/hosts' format before
// asking the system resolver. The lab gives each service graph one such
// file, naming every Service's cluster IP, as Kubernetes' DNS would answer
// for it: the lab's pods are network namespaces that share the host's
// /etc/hosts and have no cluster DNS. Outside the lab (no file) names
// resolve as usual.
package hosts

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
)

// Table maps names to addresses. The zero Table resolves nothing itself.
type Table struct {
	addrs map[string]netip.Addr
}

// Load reads a hosts file: lines of an address and one or more names,
// '#' starting a comment. The first address given for a name is kept, as
// the C library does.
func Load(path string) (*Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("hosts file: %w", err)
	}
	return Parse(b, path)
}

// Parse reads a hosts file's contents; name labels errors.
func Parse(b []byte, name string) (*Table, error) {
	t := &Table{addrs: map[string]netip.Addr{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		addr, err := netip.ParseAddr(f[0])
		if err != nil || len(f) < 2 {
			return nil, fmt.Errorf("hosts file %s: line %d: want an address and a name, got %q", name, n, strings.TrimSpace(line))
		}
		for _, h := range f[1:] {
			h = strings.ToLower(h)
			if _, ok := t.addrs[h]; !ok {
				t.addrs[h] = addr
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("hosts file %s: %w", name, err)
	}
	return t, nil
}

// Lookup returns the address the file gives name.
func (t *Table) Lookup(name string) (netip.Addr, bool) {
	if t == nil {
		return netip.Addr{}, false
	}
	a, ok := t.addrs[strings.ToLower(strings.TrimSuffix(name, "."))]
	return a, ok
}

// Dialer dials through d, resolving host names from the table first.
func (t *Table) Dialer(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil {
			if a, ok := t.Lookup(host); ok {
				addr = net.JoinHostPort(a.String(), port)
			}
		}
		return d.DialContext(ctx, network, addr)
	}
}

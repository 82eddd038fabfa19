package proc

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The kernel's view of a process's listening sockets is how meshperf learns
// the address of a program that cannot write a ready file (Prometheus): it
// is started on port 0 and the port it got is read from /proc, never from
// its log, and never picked in advance, which another process could take
// first.

// tcpListen is the state column's value for a listening socket in
// /proc/net/tcp (TCP_LISTEN in the kernel's enum).
const tcpListen = "0A"

// ListeningAddrs returns the TCP addresses the process pid listens on,
// sorted: the sockets in its file table that /proc/PID/net/tcp and tcp6 (the
// process's own network namespace) list as listening.
func ListeningAddrs(pid int) ([]netip.AddrPort, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	inodes, err := socketInodes(filepath.Join(dir, "fd"))
	if err != nil {
		return nil, err
	}
	var out []netip.AddrPort
	for _, table := range []string{"tcp", "tcp6"} {
		found, err := listeningIn(filepath.Join(dir, "net", table), inodes)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return out, nil
}

// socketInodes are the inodes of the sockets among a process's open files.
func socketInodes(fdDir string) (map[string]bool, error) {
	entries, err := os.ReadDir(fdDir)
	if err != nil {
		return nil, fmt.Errorf("open files: %w", err)
	}
	inodes := map[string]bool{}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		if err != nil {
			continue // closed since ReadDir
		}
		if ino, ok := strings.CutPrefix(target, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	return inodes, nil
}

// listeningIn reads one of /proc/PID/net/tcp{,6} and returns the local
// addresses of the listening sockets whose inode is in inodes.
func listeningIn(path string, inodes map[string]bool) ([]netip.AddrPort, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) { // no IPv6 in this kernel
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	var out []netip.AddrPort
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != tcpListen || !inodes[fields[9]] {
			continue
		}
		ap, err := parseProcAddr(fields[1])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, ap)
	}
	return out, sc.Err()
}

// parseProcAddr reads /proc/net/tcp's "0100007F:1F90": the address as the
// kernel holds it, 32-bit words in the machine's byte order (little-endian
// on every platform meshperf runs on), then the port in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	host, port, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q: no port", s)
	}
	raw, err := hex.DecodeString(host)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q: not an IPv4 or IPv6 address", s)
	}
	n, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: bad port", s)
	}
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(raw[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(n)), nil
}

// WaitListening polls until the process listens on at least one TCP
// address and returns them all (see ListeningAddrs). Like WaitReady, it
// fails at once with the exit reason if the process exits first, and when
// ctx ends or timeout (if positive) passes.
func (p *Process) WaitListening(ctx context.Context, timeout time.Duration) ([]netip.AddrPort, error) {
	var addrs []netip.AddrPort
	err := p.Poll(ctx, timeout, "listen on a TCP port", func() (bool, error) {
		var err error
		addrs, err = ListeningAddrs(p.PID())
		if err != nil && (p.Exited() || errors.Is(err, fs.ErrNotExist)) {
			return false, nil // its /proc entry is going with it; poll reports the exit
		}
		return len(addrs) > 0, err
	})
	return addrs, err
}

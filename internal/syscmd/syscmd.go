// Package syscmd finds the system commands meshperf drives (iptables-restore,
// ip, prometheus). It is the one lookup the lab and the tests share, so that
// what a test calls missing is what the lab would fail to find.
package syscmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// sbinDirs hold administration commands; the PATH of a non-root shell often
// lacks them although the commands are installed and meshperf, as root,
// can run them.
var sbinDirs = []string{"/usr/local/sbin", "/usr/sbin", "/sbin"}

// Find returns the path of command: on PATH, else in the sbin directories.
// The error names the Debian package that provides it.
func Find(command, debianPackage string) (string, error) {
	if p, err := exec.LookPath(command); err == nil {
		return p, nil
	}
	for _, d := range sbinDirs {
		p := filepath.Join(d, command)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found; install %s (apt-get install %s)", command, debianPackage, debianPackage)
}

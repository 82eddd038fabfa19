// Package syscmd finds the system commands meshperf drives (iptables-restore,
// ip, prometheus, PostgreSQL's initdb and postgres for the tests). It is the one lookup the lab and the tests share, so that
// what a test calls missing is what the lab would fail to find.
package syscmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
)

// sbinDirs hold administration commands; the PATH of a non-root shell often
// lacks them although the commands are installed and meshperf, as root,
// can run them.
var sbinDirs = []string{"/usr/local/sbin", "/usr/sbin", "/sbin"}

// postgresBinGlob matches Debian's PostgreSQL server directories, one per
// major version: the package keeps initdb, pg_ctl and postgres there, off
// PATH, so that several versions can be installed side by side.
var postgresBinGlob = "/usr/lib/postgresql/*/bin"

// postgresBinDirs are the PostgreSQL server directories, newest version
// first.
func postgresBinDirs() []string {
	dirs, _ := filepath.Glob(postgresBinGlob)
	major := func(dir string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		return n
	}
	slices.SortFunc(dirs, func(a, b string) int { return major(b) - major(a) })
	return dirs
}

// Find returns the path of command: on PATH, else in the sbin directories,
// else in the newest PostgreSQL server directory that has it. The error
// names the Debian package that provides it.
func Find(command, debianPackage string) (string, error) {
	if p, err := exec.LookPath(command); err == nil {
		return p, nil
	}
	for _, d := range append(slices.Clone(sbinDirs), postgresBinDirs()...) {
		p := filepath.Join(d, command)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found; install %s (apt-get install %s)", command, debianPackage, debianPackage)
}

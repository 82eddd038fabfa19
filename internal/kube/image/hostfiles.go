package image

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/meshperf/meshperf/internal/syscmd"
)

// hostFiles collects host files for a layer as the host's own paths
// resolve them: every symbolic link met on the way (Debian's merged /usr,
// the alternatives system) becomes the same link in the image, and the file
// it ends at a regular file, so that a path that works on the host works in
// the image.
type hostFiles struct {
	files []File
	added map[string]bool
}

func newHostFiles() *hostFiles { return &hostFiles{added: map[string]bool{}} }

// add adds the file at p (absolute), its links, and returns its real path.
func (h *hostFiles) add(p string) (string, error) {
	real, err := h.resolve(p, 0)
	if err != nil {
		return "", err
	}
	if !h.added[real] {
		h.added[real] = true
		h.files = append(h.files, File{Path: real, Source: real})
	}
	return real, nil
}

// resolve walks p one component at a time, adding each symbolic link it
// meets, and returns the path with none left.
func (h *hostFiles) resolve(p string, depth int) (string, error) {
	if depth > 40 {
		return "", fmt.Errorf("%s: too many levels of symbolic links", p)
	}
	done := "/"
	rest := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	for i, part := range rest {
		cur := path.Join(done, part)
		st, err := os.Lstat(cur)
		if err != nil {
			return "", err
		}
		if st.Mode()&os.ModeSymlink == 0 {
			done = cur
			continue
		}
		target, err := os.Readlink(cur)
		if err != nil {
			return "", err
		}
		if !h.added[cur] {
			h.added[cur] = true
			h.files = append(h.files, File{Path: cur, Link: target})
		}
		if !path.IsAbs(target) {
			target = path.Join(done, target)
		}
		return h.resolve(path.Join(append([]string{target}, rest[i+1:]...)...), depth+1)
	}
	return done, nil
}

// addELF adds the executable or shared object at p with its interpreter
// and every shared library it needs, transitively, found as the dynamic
// loader finds them (its DT_RUNPATH or DT_RPATH, then the directories of
// /etc/ld.so.conf, then /lib and /usr/lib).
func (h *hostFiles) addELF(p string, searchDirs []string) error {
	real, err := h.add(p)
	if err != nil {
		return err
	}
	f, err := elf.Open(real)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		interp, err := readInterp(prog)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if _, err := h.add(interp); err != nil {
			return fmt.Errorf("%s's interpreter: %w", p, err)
		}
	}
	needed, err := f.DynString(elf.DT_NEEDED)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	dirs := runPath(f, real)
	dirs = append(dirs, searchDirs...)
	for _, lib := range needed {
		found, err := findLibrary(lib, dirs, f.Class, f.Machine)
		if err != nil {
			return fmt.Errorf("%s needs %s: %w", p, lib, err)
		}
		if h.added[found] {
			continue
		}
		if err := h.addELF(found, searchDirs); err != nil {
			return err
		}
	}
	return nil
}

func readInterp(prog *elf.Prog) (string, error) {
	buf := make([]byte, prog.Filesz)
	if _, err := prog.ReadAt(buf, 0); err != nil {
		return "", fmt.Errorf("reading the interpreter: %w", err)
	}
	return strings.TrimRight(string(buf), "\x00"), nil
}

// runPath is the object's own library directories: DT_RUNPATH, else the
// older DT_RPATH, with $ORIGIN expanded.
func runPath(f *elf.File, real string) []string {
	entries, _ := f.DynString(elf.DT_RUNPATH)
	if len(entries) == 0 {
		entries, _ = f.DynString(elf.DT_RPATH)
	}
	var dirs []string
	for _, e := range entries {
		for _, d := range strings.Split(e, ":") {
			d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", "$ORIGIN"), "$ORIGIN", path.Dir(real))
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}

// findLibrary finds the first lib in dirs of the object's class and
// machine (a multilib system also keeps 32-bit libraries of the same name).
func findLibrary(lib string, dirs []string, class elf.Class, machine elf.Machine) (string, error) {
	for _, d := range dirs {
		p := filepath.Join(d, lib)
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		ok := f.Class == class && f.Machine == machine
		f.Close()
		if ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("not found in %s", strings.Join(dirs, ":"))
}

// loaderSearchDirs are the directories the dynamic loader searches after an
// object's own: those of /etc/ld.so.conf (following its includes), then
// the default ones. The loader reads them from ld.so.cache, which
// ldconfig builds from the same files.
func loaderSearchDirs(conf string) []string {
	var dirs []string
	var read func(file string, depth int)
	read = func(file string, depth int) {
		f, err := os.Open(file)
		if err != nil || depth > 8 {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = strings.TrimSpace(line[:i])
			}
			if pattern, ok := strings.CutPrefix(line, "include "); ok {
				pattern = strings.TrimSpace(pattern)
				if !filepath.IsAbs(pattern) {
					pattern = filepath.Join(filepath.Dir(file), pattern)
				}
				matches, _ := filepath.Glob(pattern)
				slices.Sort(matches)
				for _, m := range matches {
					read(m, depth+1)
				}
				continue
			}
			if line != "" && !slices.Contains(dirs, line) {
				dirs = append(dirs, line)
			}
		}
	}
	read(conf, 0)
	for _, d := range []string{"/lib", "/usr/lib"} {
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// xtablesDir is where Debian's iptables loads its match and target
// extensions from (dlopen, so no DT_NEEDED names them).
const xtablesDir = "/usr/lib/x86_64-linux-gnu/xtables"

// iptablesFiles are the host's iptables-restore as the lab runs it: the
// command, the alternatives links that choose its backend, the program
// they end at, its libraries and loader, and the extensions it loads for
// the capture's rules.
//
// Why the host's and not a static build: the capture init container applies
// the same rules the lab applies on the host (Istio's proxy image carries
// iptables for its istio-init container the same way); Debian's package is
// what this machine and CI install, and no static iptables is packaged.
func iptablesFiles() ([]File, error) {
	bin, err := syscmd.Find("iptables-restore", "iptables")
	if err != nil {
		return nil, err
	}
	h := newHostFiles()
	search := loaderSearchDirs("/etc/ld.so.conf")
	if err := h.addELF(bin, search); err != nil {
		return nil, fmt.Errorf("iptables-restore: %w", err)
	}
	// The image's PATH finds it under /usr/sbin whatever the host's PATH
	// found: add that name too when the host's lookup was elsewhere.
	if !h.added["/usr/sbin/iptables-restore"] {
		h.files = append(h.files, File{Path: "/usr/sbin/iptables-restore", Link: bin})
	}
	extensions, err := filepath.Glob(filepath.Join(xtablesDir, "*.so"))
	if err != nil || len(extensions) == 0 {
		return nil, fmt.Errorf("no iptables extensions in %s: install iptables (apt-get install iptables)", xtablesDir)
	}
	for _, ext := range extensions {
		if err := h.addELF(ext, search); err != nil {
			return nil, fmt.Errorf("iptables extension: %w", err)
		}
	}
	return h.files, nil
}

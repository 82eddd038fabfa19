package dist

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/mod/modfile"
)

// codeGeneratorVersion replaces k8s.io/code-generator: the proxy does not
// serve its v0.33.13, and only its go.mod is read (no binary imports it).
const codeGeneratorVersion = "v0.33.0"

// kubernetesCommands are the k8s.io/kubernetes main packages built, with
// the name of the binary each gives.
var kubernetesCommands = []string{APIServer, ControllerManager, Scheduler, Kubelet, KubeProxy, Kubectl}

// installed are the binaries `go install MOD@VER` gives, by name.
var installed = map[string]string{
	CoreDNS: "github.com/coredns/coredns@" + CoreDNSVersion,
	Kwok:    "sigs.k8s.io/kwok/cmd/kwok@" + KwokVersion,
}

// BuildResult says what Build did.
type BuildResult struct {
	Dir          string
	AlreadyBuilt bool // every binary was there with the right version, and kwok's stages: nothing was done
}

// Build builds the pinned binaries into dir, normally Dir(). It is
// idempotent (nothing is built when every binary in dir reports its pinned
// version) and atomic: the binaries are built into dir.tmp-* beside it,
// checked, and renamed into place at the end, so that a failed or
// interrupted build leaves no half-filled cache that Find would accept.
// progress gets one line per step with its duration.
func Build(ctx context.Context, dir string, progress io.Writer) (BuildResult, error) {
	res := BuildResult{Dir: dir}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return res, errors.New("building Kubernetes needs the Go toolchain on PATH (https://go.dev/dl)")
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return res, err
	}
	// Two builds at once would race on the rename; the second waits and
	// then finds the first one's binaries.
	lock, err := os.OpenFile(dir+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return res, fmt.Errorf("build lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return res, fmt.Errorf("build lock %s: %w", lock.Name(), err)
	}
	if CheckVersions(ctx, Bins{Dir: dir}) == nil {
		if _, err := (Bins{Dir: dir}).KwokStages(); err == nil {
			res.AlreadyBuilt = true
			return res, nil
		}
		// A cache built before the stages were kept in it: the binaries
		// stay, the stages are added.
		start := time.Now()
		if err := copyKwokStages(ctx, goTool, dir); err != nil {
			return res, fmt.Errorf("copy kwok's stages: %w", err)
		}
		fmt.Fprintf(progress, "%-60s %s\n", "copy kwok's stages", time.Since(start).Round(100*time.Millisecond))
		return res, nil
	}
	// What an interrupted build left (the lock says none is running).
	stale, _ := filepath.Glob(dir + ".tmp-*")
	for _, s := range stale {
		_ = os.RemoveAll(s)
	}
	out, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(out) // a no-op once renamed
	work, err := os.MkdirTemp("", "meshperf-kube-build-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(work)
	b := &builder{ctx: ctx, goTool: goTool, work: work, out: out, progress: progress}
	if err := b.run(); err != nil {
		return res, err
	}
	if err := CheckVersions(ctx, Bins{Dir: out}); err != nil {
		return res, fmt.Errorf("the built binaries: %w", err)
	}
	if err := os.Chmod(out, 0o755); err != nil {
		return res, err
	}
	// Move an outdated cache aside rather than over it: rename cannot
	// replace a non-empty directory.
	if _, err := os.Stat(dir); err == nil {
		old := out + ".old"
		if err := os.Rename(dir, old); err != nil {
			return res, err
		}
		defer os.RemoveAll(old)
	}
	return res, os.Rename(out, dir)
}

// builder runs the build's steps in a scratch module.
type builder struct {
	ctx      context.Context
	goTool   string
	work     string // the scratch module
	out      string // where the binaries go
	progress io.Writer
}

func (b *builder) run() error {
	steps := []struct {
		what string
		do   func() error
	}{
		{"scratch module for k8s.io/kubernetes " + KubernetesVersion, b.writeModule},
		{"go mod tidy", func() error { return b.goCmd("mod", "tidy") }},
	}
	for _, name := range kubernetesCommands {
		steps = append(steps, struct {
			what string
			do   func() error
		}{"build " + name, func() error { return b.buildKubernetes(name) }})
	}
	for _, name := range []string{CoreDNS, Kwok} {
		steps = append(steps, struct {
			what string
			do   func() error
		}{"build " + name + " (" + installed[name] + ")", func() error { return b.goCmd("install", "-trimpath", "-ldflags", "-s -w", installed[name]) }})
	}
	steps = append(steps, struct {
		what string
		do   func() error
	}{"copy kwok's stages", func() error { return copyKwokStages(b.ctx, b.goTool, b.out) }})
	total := time.Now()
	for _, s := range steps {
		start := time.Now()
		if err := s.do(); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		fmt.Fprintf(b.progress, "%-60s %s\n", s.what, time.Since(start).Round(100*time.Millisecond))
	}
	fmt.Fprintf(b.progress, "%-60s %s\n", "built", time.Since(total).Round(time.Second))
	return nil
}

// writeModule writes a module requiring k8s.io/kubernetes with the go and
// godebug lines of its own go.mod, and every staging module its replace
// block points into the repository replaced by the published version: the
// main module's replacements are the only ones Go applies, and the staging
// directories are not in the module's zip.
func (b *builder) writeModule() error {
	gomod, err := b.moduleGoMod("k8s.io/kubernetes@" + KubernetesVersion)
	if err != nil {
		return err
	}
	f, err := modfile.Parse("k8s.io/kubernetes/go.mod", gomod, nil)
	if err != nil {
		return err
	}
	text, err := scratchModule(f)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.work, "go.mod"), text, 0o644); err != nil {
		return err
	}
	// tidy keeps only what some package imports; a file behind a build tag
	// never compiled names the commands (the way Go modules track tools).
	tools := "//go:build tools\n\npackage tools\n\nimport (\n"
	for _, name := range kubernetesCommands {
		if name == Kubectl {
			tools += "\t_ \"k8s.io/kubectl/pkg/cmd\"\n"
			continue
		}
		tools += "\t_ \"k8s.io/kubernetes/cmd/" + name + "\"\n"
	}
	tools += ")\n"
	return os.WriteFile(filepath.Join(b.work, "tools.go"), []byte(tools), 0o644)
}

// scratchModule is the scratch module's go.mod for k8s.io/kubernetes's.
func scratchModule(k *modfile.File) ([]byte, error) {
	if k.Module == nil || k.Module.Mod.Path != "k8s.io/kubernetes" || k.Go == nil {
		return nil, errors.New("not k8s.io/kubernetes's go.mod (no module line, or no go line)")
	}
	f := &modfile.File{}
	if err := f.AddModuleStmt("meshperf.local/kubebuild"); err != nil {
		return nil, err
	}
	if err := f.AddGoStmt(k.Go.Version); err != nil {
		return nil, err
	}
	for _, g := range k.Godebug {
		if err := f.AddGodebug(g.Key, g.Value); err != nil {
			return nil, err
		}
	}
	if err := f.AddRequire("k8s.io/kubernetes", KubernetesVersion); err != nil {
		return nil, err
	}
	staging := strings.Replace(KubernetesVersion, "v1.", "v0.", 1)
	n := 0
	for _, r := range k.Replace {
		if !strings.HasPrefix(r.Old.Path, "k8s.io/") || !strings.HasPrefix(r.New.Path, "./staging/") {
			continue
		}
		v := staging
		if r.Old.Path == "k8s.io/code-generator" {
			v = codeGeneratorVersion
		}
		if err := f.AddReplace(r.Old.Path, "", r.Old.Path, v); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, errors.New("k8s.io/kubernetes's go.mod replaces no staging module")
	}
	f.Cleanup()
	return f.Format()
}

// moduleGoMod downloads a module and returns its go.mod.
func (b *builder) moduleGoMod(modVersion string) ([]byte, error) {
	out, err := b.goOutput("mod", "download", "-json", modVersion)
	if err != nil {
		return nil, err
	}
	var info struct{ GoMod, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return nil, fmt.Errorf("go mod download %s: %w", modVersion, err)
	}
	if info.Error != "" {
		return nil, fmt.Errorf("go mod download %s: %s", modVersion, info.Error)
	}
	return os.ReadFile(info.GoMod)
}

// buildKubernetes builds one command with the version stamped in: without
// the -X flags the binaries report v0.0.0, and the kubelet's version is
// what the API server shows for the node.
func (b *builder) buildKubernetes(name string) error {
	minor := strings.Split(KubernetesVersion, ".")[1]
	var ldflags strings.Builder
	ldflags.WriteString("-s -w")
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		fmt.Fprintf(&ldflags, " -X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=%s", pkg, KubernetesVersion, pkg, pkg, minor)
	}
	return b.goCmd("build", "-trimpath", "-ldflags", ldflags.String(), "-o", filepath.Join(b.out, name), "k8s.io/kubernetes/cmd/"+name)
}

func (b *builder) command(args ...string) *exec.Cmd {
	cmd := exec.CommandContext(b.ctx, b.goTool, args...)
	cmd.Dir = b.work
	// Static binaries (they run in any image and on any host); the scratch
	// module's dependencies resolved as tidy finds them; no workspace or
	// toolchain switch from the caller's environment.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local", "GOBIN="+b.out)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func (b *builder) goCmd(args ...string) error {
	_, err := b.goOutput(args...)
	return err
}

// goOutput runs go and returns its stdout; on failure the error carries
// the end of its stderr, where go says what went wrong.
func (b *builder) goOutput(args ...string) ([]byte, error) {
	cmd := b.command(args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if b.ctx.Err() != nil {
			return nil, b.ctx.Err()
		}
		return nil, fmt.Errorf("go %s: %v: %s", args[0], err, lastLines(stderr.String(), 5))
	}
	return out, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// versionArgs is how each binary is asked its version, and what it must
// answer.
var versionArgs = map[string]struct {
	args []string
	want string
}{
	APIServer:         {[]string{"--version"}, "Kubernetes " + KubernetesVersion},
	ControllerManager: {[]string{"--version"}, "Kubernetes " + KubernetesVersion},
	Scheduler:         {[]string{"--version"}, "Kubernetes " + KubernetesVersion},
	Kubelet:           {[]string{"--version"}, "Kubernetes " + KubernetesVersion},
	KubeProxy:         {[]string{"--version"}, "Kubernetes " + KubernetesVersion},
	Kubectl:           {[]string{"version", "--client"}, "Client Version: " + KubernetesVersion},
	CoreDNS:           {[]string{"-version"}, "CoreDNS-" + strings.TrimPrefix(CoreDNSVersion, "v")},
	Kwok:              {[]string{"--version"}, "kwok version " + KwokVersion},
}

// CheckVersions runs every binary in b and checks it reports its pinned
// version; the error names the first that does not.
func CheckVersions(ctx context.Context, b Bins) error {
	for _, name := range Names {
		v := versionArgs[name]
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := exec.CommandContext(ctx, b.Path(name), v.args...).CombinedOutput()
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %v", b.Path(name), err)
		}
		if first := strings.SplitN(string(out), "\n", 2)[0]; !strings.HasPrefix(first, v.want) {
			return fmt.Errorf("%s reports %q, not %q", b.Path(name), strings.TrimSpace(first), v.want)
		}
	}
	return nil
}

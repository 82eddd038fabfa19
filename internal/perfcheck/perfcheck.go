// Package perfcheck runs meshperf's micro-benchmarks and compares them with
// the baselines kept beside them: a bench.baseline file (Go's benchmark
// format) in each Go package folder that has benchmarks, and criterion's
// saved baseline of the proxy's benches in proxy/benches/baseline/. Go
// results are parsed with benchfmt and judged with benchstat's statistics
// (benchmath: medians with confidence intervals, the Mann-Whitney U test);
// Rust results with criterion's own estimates of the change. A benchmark is
// worse when the change is significant and its point estimate exceeds a
// threshold. Baselines record the machine they were measured on, since
// figures from different machines say nothing about the code.
package perfcheck

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/results"
)

// Options are a perfcheck run's settings, from the command line.
type Options struct {
	// Path is a folder (optionally ending in /...) or a Go package pattern;
	// "" is the whole module, Go and Rust.
	Path      string
	Bench     string        // regexp selecting benchmarks; "." for all
	Count     int           // runs of each Go benchmark (2 or more)
	Benchtime time.Duration // go test -benchtime
	Stats     Stats
	GoOnly    bool
	RustOnly  bool
	// Progress receives a line per step (each go or cargo run), for a
	// person waiting; nil discards them.
	Progress io.Writer
}

// Plan is a resolved perfcheck run: the packages and baselines it covers,
// checked before anything is run.
type Plan struct {
	opts       Options
	moduleRoot string
	modulePath string
	goRun      *GoRun // nil when the run has no Go side
	packages   []goPackage
	rust       *rustPlan // nil when the run has no Rust side
}

// goPackage is a Go package the run covers, with its baseline.
type goPackage struct {
	importPath, dir string
	baseline        *BenchSet // nil when it has none
}

// baselinePath is the package's baseline file.
func (p goPackage) baselinePath() string { return filepath.Join(p.dir, goBaselineName) }

// InputError is a perfcheck input that cannot be used: a PATH that does not
// exist or holds nothing to run, a baseline file that does not parse or
// belongs to another benchmark set. Nothing was run.
type InputError struct{ Err error }

func (e InputError) Error() string { return e.Err.Error() }
func (e InputError) Unwrap() error { return e.Err }

func inputErrorf(format string, args ...any) error { return InputError{fmt.Errorf(format, args...)} }

// NewPlan resolves opts.Path and reads the baselines it covers (for
// update, only those a partial update merges with). Its errors are
// InputErrors, except a cancelled ctx.
func NewPlan(ctx context.Context, opts Options, forUpdate bool) (*Plan, error) {
	if opts.Path == "" {
		opts.Path = "./..."
	}
	if opts.Bench == "" {
		opts.Bench = "."
	}
	p := &Plan{opts: opts}
	goDir, pattern, folder, err := resolvePath(opts.Path)
	if err != nil {
		return nil, err
	}
	gomod, err := command(ctx, goDir, "", "go", "env", "GOMOD")
	if err != nil {
		return nil, inputErrorf("%s: %v", opts.Path, err)
	}
	if gomod = strings.TrimSpace(gomod); gomod == "" || gomod == os.DevNull {
		return nil, inputErrorf("%s is not inside a Go module", opts.Path)
	}
	p.moduleRoot = filepath.Dir(gomod)
	proxyDir := filepath.Join(p.moduleRoot, "proxy")
	inProxy := folder != "" && within(proxyDir, folder)
	wholeTree := folder == p.moduleRoot && strings.HasSuffix(opts.Path, "...")
	if !opts.RustOnly && !inProxy {
		if err := p.planGo(ctx, goDir, pattern, forUpdate); err != nil {
			return nil, err
		}
	}
	// The whole tree includes the proxy's benches when the module has the
	// proxy (a module without one has no Rust side); -rust-only wants it.
	_, hasProxy := os.Stat(filepath.Join(proxyDir, "Cargo.toml"))
	if opts.RustOnly || (!opts.GoOnly && (inProxy || (wholeTree && hasProxy == nil))) {
		if p.rust, err = loadRustPlan(proxyDir, p.readBaselines(forUpdate)); err != nil {
			return nil, InputError{err}
		}
	}
	return p, nil
}

// resolvePath turns PATH into where go runs and the package pattern it is
// given. A PATH whose first element has a dot (github.com/...) is an
// import path pattern; anything else is a folder, which must exist.
func resolvePath(path string) (goDir, pattern, folder string, err error) {
	dir, recursive := strings.CutSuffix(path, "...")
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	first, _, _ := strings.Cut(filepath.ToSlash(path), "/")
	if strings.Contains(first, ".") && first != "." && first != ".." {
		return ".", path, "", nil
	}
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return "", "", "", inputErrorf("PATH %s: no such folder", path)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", "", InputError{err}
	}
	pattern = "."
	if recursive {
		pattern = "./..."
	}
	return abs, pattern, abs, nil
}

func within(parent, dir string) bool {
	rel, err := filepath.Rel(parent, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// relDir is dir relative to root for messages, or dir when it is not under root.
func relDir(root, dir string) string {
	if rel, err := filepath.Rel(root, dir); err == nil && within(root, dir) {
		return rel
	}
	return dir
}

// readBaselines says whether the run reads the baselines: a comparison
// does, and a partial update (-bench) that keeps the benchmarks it did not
// run; a full update rewrites every baseline, so an unreadable one must not
// stop it.
func (p *Plan) readBaselines(forUpdate bool) bool { return !forUpdate || p.opts.Bench != "." }

// planGo lists the packages of the pattern and reads their baselines.
func (p *Plan) planGo(ctx context.Context, goDir, pattern string, forUpdate bool) error {
	out, err := command(ctx, goDir, "", "go", "list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{.Module.Path}}", pattern)
	if err != nil {
		return inputErrorf("%s: %v", p.opts.Path, err)
	}
	for line := range strings.Lines(out) {
		fields := strings.Split(strings.TrimSpace(line), "\t")
		if len(fields) != 3 {
			continue // go's warnings, e.g. "matched no packages"
		}
		p.modulePath = fields[2]
		p.packages = append(p.packages, goPackage{importPath: fields[0], dir: fields[1]})
	}
	if len(p.packages) == 0 {
		return inputErrorf("PATH %s holds no Go packages", p.opts.Path)
	}
	if p.readBaselines(forUpdate) {
		for i, pkg := range p.packages {
			if _, err := os.Stat(pkg.baselinePath()); err != nil {
				continue
			}
			if p.packages[i].baseline, err = readGoBaseline(pkg.baselinePath(), pkg.importPath); err != nil {
				return InputError{err}
			}
		}
	}
	commit := treeCommit(ctx, p.moduleRoot)
	p.goRun = &GoRun{Dir: goDir, Pattern: pattern, Bench: p.opts.Bench, Count: p.opts.Count, Benchtime: p.opts.Benchtime, Commit: commit}
	return nil
}

// treeCommit is the commit of the tree being measured, with "(modified)"
// when it has uncommitted changes; "" outside a git work tree.
func treeCommit(ctx context.Context, dir string) string {
	head, err := command(ctx, dir, "", "git", "rev-parse", "--short=12", "HEAD")
	if err != nil {
		return ""
	}
	commit := strings.TrimSpace(head)
	if status, err := command(ctx, dir, "", "git", "status", "--porcelain", "--untracked-files=no"); err == nil && strings.TrimSpace(status) != "" {
		commit += " (modified)"
	}
	return commit
}

func (p *Plan) progress(line string) {
	if p.opts.Progress != nil {
		_, _ = fmt.Fprintln(p.opts.Progress, "perfcheck: running "+line)
	}
}

// groupName is a package's name in the report: its folder in the module.
func (p *Plan) groupName(pkg goPackage) string {
	if rel, ok := strings.CutPrefix(pkg.importPath, p.modulePath+"/"); ok {
		return rel
	}
	return pkg.importPath
}

// goVersion is the toolchain's version, as `go env GOVERSION` says.
func goVersion(ctx context.Context, dir string) (string, error) {
	v, err := command(ctx, dir, "", "go", "env", "GOVERSION")
	return strings.TrimSpace(v), err
}

// runGo runs the Go benchmarks and returns the sets by package.
func (p *Plan) runGo(ctx context.Context, m results.Machine) (map[string]*BenchSet, error) {
	gv, err := goVersion(ctx, p.goRun.Dir)
	if err != nil {
		return nil, err
	}
	p.progress(fmt.Sprintf("go test -bench %s -count %d -benchtime %s %s", p.goRun.Bench, p.goRun.Count, p.goRun.Benchtime, p.opts.Path))
	return runGoBenchmarks(ctx, *p.goRun, m, gv)
}

// Check runs the benchmarks and compares them with their baselines.
func (p *Plan) Check(ctx context.Context) (*Report, error) {
	m := results.LocalMachine()
	r := &Report{Machine: m, Confidence: p.opts.Stats.Confidence, Threshold: p.opts.Stats.Threshold}
	if p.goRun != nil {
		sets, err := p.runGo(ctx, m)
		if err != nil {
			return nil, err
		}
		r.Count, r.Benchtime = p.goRun.Count, p.goRun.Benchtime.String()
		var across []string
		var baselineMachine, currentMachine results.Machine
		for _, pkg := range p.packages {
			cur := sets[pkg.importPath]
			if cur == nil && pkg.baseline == nil {
				continue
			}
			g := Group{Name: p.groupName(pkg), Lang: "go"}
			if pkg.baseline != nil {
				g.Baseline = filepath.ToSlash(relDir(p.moduleRoot, pkg.baselinePath()))
				g.BaselineDate, g.BaselineCommit = pkg.baseline.config(keyDate), pkg.baseline.config(keyCommit)
				if cur != nil && cur.Machine().Key() != pkg.baseline.Machine().Key() {
					across = append(across, g.Name)
					baselineMachine, currentMachine = pkg.baseline.Machine(), cur.Machine()
				}
			}
			g.Rows = compareSets(pkg.baseline, cur, p.opts.Stats, p.opts.Bench == ".")
			r.Groups = append(r.Groups, g)
		}
		if len(across) > 0 {
			r.AcrossMachines = append(r.AcrossMachines, acrossMachines(baselinesOf(across), baselineMachine, currentMachine))
		}
	}
	if p.rust != nil {
		groups, err := p.rust.compare(ctx, p.opts.Stats, p.criterionFilter(), p.progress)
		if err != nil {
			return nil, err
		}
		if p.rust.summary != nil {
			if line := acrossMachines("the proxy's criterion baseline", p.rust.summary.Machine, m); line != "" {
				r.AcrossMachines = append(r.AcrossMachines, line)
			}
		}
		r.Groups = append(r.Groups, groups...)
	}
	r.count()
	return r, nil
}

// baselinesOf names the Go baselines measured elsewhere, listing a few.
func baselinesOf(groups []string) string {
	if len(groups) <= 3 {
		return "the baseline of " + strings.Join(groups, ", ")
	}
	return fmt.Sprintf("the baselines of %d Go packages (%s, ...)", len(groups), strings.Join(groups[:3], ", "))
}

// criterionFilter is -bench as criterion's filter: "" for all.
func (p *Plan) criterionFilter() string {
	if p.opts.Bench == "." {
		return ""
	}
	return p.opts.Bench
}

// Update runs the benchmarks and rewrites the baselines with their results.
// It returns one line per file written (or removed).
func (p *Plan) Update(ctx context.Context) ([]string, error) {
	m := results.LocalMachine()
	var written []string
	if p.goRun != nil {
		sets, err := p.runGo(ctx, m)
		if err != nil {
			return nil, err
		}
		for _, pkg := range p.packages {
			cur := sets[pkg.importPath]
			rel := filepath.ToSlash(relDir(p.moduleRoot, pkg.baselinePath()))
			if cur == nil {
				// A full run found no benchmarks left in a package that had
				// a baseline: the baseline goes with them.
				if p.opts.Bench == "." {
					if err := os.Remove(pkg.baselinePath()); err == nil {
						written = append(written, "removed "+rel+" (the package has no benchmarks now)")
					}
				}
				continue
			}
			set := mergeForUpdate(pkg.baseline, cur)
			data, err := encodeGoBaseline(set)
			if err != nil {
				return nil, err
			}
			if err := os.WriteFile(pkg.baselinePath(), data, 0o644); err != nil {
				return nil, err
			}
			names, _ := set.samples()
			written = append(written, fmt.Sprintf("wrote %s (%d benchmarks, %d runs)", rel, len(names), len(set.Results)))
		}
	}
	if p.rust != nil {
		path, n, err := p.rust.update(ctx, p.criterionFilter(), m, treeCommit(ctx, p.moduleRoot), p.progress)
		if err != nil {
			return nil, err
		}
		written = append(written, fmt.Sprintf("wrote %s and criterion's files beside it (%d benches)", filepath.ToSlash(relDir(p.moduleRoot, path)), n))
	}
	return written, nil
}

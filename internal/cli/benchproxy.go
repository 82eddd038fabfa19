package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/bench"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/syscmd"
)

// benchProxyFlags are `meshperf bench proxy`'s flags.
type benchProxyFlags struct {
	benchFlags
	conn, size, threads int
	duration, warmup    time.Duration
	qps                 []int
	protocols           []scenario.Protocol
	cases               []string
	haproxy, proxy, out string
}

func benchProxy(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf bench proxy", "[flags]",
		"Measures no proxy, meshperf-proxy and HAProxy side by side on this machine, on loopback: one hop in front of the\n"+
			"echo server (plaintext) and two proxies doing mutual TLS (meshperf's sidecars configured by meshperf pilot with\n"+
			"STRICT PeerAuthentication; two HAProxys with certificates from the same CA, verify required), over HTTP/1.1 and\n"+
			"HTTP/2 (h2c), at each -qps. Each rate runs -repeats rounds, every subject once per round in a rotating order,\n"+
			"each run after a warm-up at its rate. Per proxy: CPU per 1000 rps (user+system), RSS, latency added to the\n"+
			"no-proxy run of the same round, and per request syscalls (perf), context switches and meshperf-proxy's\n"+
			"allocations, over the run's steady window. Prints medians and the ratios ours/HAProxy against the issue's goals,\n"+
			"\"noisy\" beside a ratio whose runs disagree; stores every run (scenario bench-proxy) for compare and history.\n"+
			"-baseline checks the ratios against a recorded baseline: exit 1 on a regression.")
	var f benchProxyFlags
	fs := cmd.flags
	f.define(fs, "proxy")
	durationVar(fs, &f.duration, "duration", 10*time.Second, "each measured run's load `time` (at least 1s)")
	durationVar(fs, &f.warmup, "warmup", 2*time.Second, "load `time` before each measured run, at its rate, left out of every figure")
	f.qps = []int{1000, 0}
	fs.Func("qps", "request `rates`, comma-separated; 0 is the maximum rate (default 1000,0)", func(v string) (err error) {
		f.qps, err = parseQPSList(v)
		return err
	})
	positiveVar(fs, &f.conn, "c", 4, "the load's `connections`")
	positiveVar(fs, &f.size, "size", 1024, "response body `bytes`")
	f.protocols = []scenario.Protocol{scenario.HTTP, scenario.H2}
	fs.Func("protocols", "`protocols`: http1, h2 (h2c), comma-separated (default http1,h2)", func(v string) (err error) {
		f.protocols, err = parseBenchProtocols(v)
		return err
	})
	f.cases = []string{bench.CasePlaintext, bench.CaseMTLS}
	fs.Func("cases", "`cases`: plaintext (one hop), mtls (two proxies), comma-separated (default plaintext,mtls)", func(v string) (err error) {
		f.cases, err = parseBenchCases(v)
		return err
	})
	positiveVar(fs, &f.threads, "threads", 2, "worker threads of each proxy: HAProxy's nbthread, meshperf-proxy's --concurrency")
	fs.StringVar(&f.haproxy, "haproxy", "", "HAProxy `binary` (default: haproxy on $PATH)")
	fs.StringVar(&f.proxy, "proxy", "", "meshperf-proxy `binary` (default: beside meshperf, then proxy/target/release, then $PATH)")
	fs.StringVar(&f.out, "out", "", "`dir` for logs, configurations and the load's results (default results/bench/proxy-<runid>)")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	cfg, err := f.config()
	if err != nil {
		return cmd.exit(stderr, err)
	}
	store, err := f.openStore()
	if err != nil {
		return cmd.exit(stderr, err)
	}
	storedIn := "not stored (-db \"\")"
	if store != nil {
		defer store.Close()
		cfg.Store = store.Insert
		storedIn = "runs stored in " + store.String()
	}
	cfg.Progress = stderr
	_, _ = fmt.Fprintf(stderr, "meshperf bench proxy: run %s, logs in %s, %s\n", cfg.RunID, cfg.OutDir, storedIn)
	report, runErr := bench.RunProxy(ctx, cfg)
	if report != nil && len(report.Cases) > 0 {
		if err := report.WriteTable(stdout); err != nil {
			return cmd.exit(stderr, err)
		}
	}
	if runErr != nil {
		return cmd.exit(stderr, runErr)
	}
	return cmd.exit(stderr, f.finish(report.Ratios(), report, stdout, stderr))
}

// config checks the flags together and finds the binaries; every error
// is bad input, before anything starts.
func (f *benchProxyFlags) config() (bench.ProxyConfig, error) {
	if f.duration < time.Second {
		return bench.ProxyConfig{}, usagef("-duration %s: at least 1s (the steady window leaves out its first 300ms and last 200ms)", f.duration)
	}
	if err := f.check(); err != nil {
		return bench.ProxyConfig{}, err
	}
	haproxy, err := bench.LookPeer(bench.HAProxyPeer, f.haproxy)
	if err != nil {
		return bench.ProxyConfig{}, inputError{err}
	}
	meshperfBin, err := os.Executable()
	if err != nil {
		return bench.ProxyConfig{}, fmt.Errorf("find the meshperf binary: %w", err)
	}
	proxy, err := findProxy(f.proxy, meshperfBin)
	if err != nil {
		return bench.ProxyConfig{}, inputError{err}
	}
	cfg := bench.ProxyConfig{MeshperfBin: meshperfBin, ProxyBin: proxy, HAProxyBin: haproxy, Repeats: f.repeats,
		Duration: f.duration, Warmup: f.warmup, QPS: f.qps, Connections: f.conn, Size: f.size, Protocols: f.protocols,
		Cases: f.cases, Threads: f.threads, OutDir: f.out, RunID: pod.NewRunID(), Labels: f.labels}
	// perf counts another process's syscalls only as root (or with
	// perf_event_paranoid lowered); without it the figure is unknown.
	if perf, err := syscmd.Find("perf", "linux-perf"); err == nil && os.Geteuid() == 0 {
		cfg.PerfBin = perf
	}
	if cfg.OutDir == "" {
		cfg.OutDir = filepath.Join("results", "bench", "proxy-"+cfg.RunID)
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return cfg, inputError{fmt.Errorf("-out: %w", err)}
	}
	return cfg, nil
}

// parseQPSList reads -qps: whole numbers, 0 for the maximum rate, each
// once.
func parseQPSList(v string) ([]int, error) {
	qps, err := scenario.ParseIntList("-qps", v)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "flag -qps: "))
	}
	for i, q := range qps {
		if q < 0 {
			return nil, fmt.Errorf("item %d (%d): a rate is 0 (the maximum) or more", i+1, q)
		}
		if slices.Contains(qps[:i], q) {
			return nil, fmt.Errorf("%d twice", q)
		}
	}
	return qps, nil
}

// parseBenchProtocols reads -protocols: http1 (HTTP/1.1, the lab's http)
// and h2.
func parseBenchProtocols(v string) ([]scenario.Protocol, error) {
	names := map[string]scenario.Protocol{"http1": scenario.HTTP, "h2": scenario.H2}
	var out []scenario.Protocol
	for _, item := range strings.Split(v, ",") {
		p, ok := names[strings.TrimSpace(item)]
		if !ok {
			return nil, fmt.Errorf("%q: want http1 or h2", item)
		}
		if slices.Contains(out, p) {
			return nil, fmt.Errorf("%s twice", item)
		}
		out = append(out, p)
	}
	return out, nil
}

// parseBenchCases reads -cases: plaintext and mtls.
func parseBenchCases(v string) ([]string, error) {
	var out []string
	for _, item := range strings.Split(v, ",") {
		c := strings.TrimSpace(item)
		if c != bench.CasePlaintext && c != bench.CaseMTLS {
			return nil, fmt.Errorf("%q: want plaintext or mtls", item)
		}
		if slices.Contains(out, c) {
			return nil, fmt.Errorf("%s twice", c)
		}
		out = append(out, c)
	}
	return out, nil
}

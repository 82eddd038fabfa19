package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/meshperf/meshperf/internal/kube/dist"
	"github.com/meshperf/meshperf/internal/kube/image"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/proc/procstat"
)

// Options says where and how to bring the cluster up.
type Options struct {
	StateDir string
	// Wait bounds the whole bring-up, until the node is Ready and CoreDNS
	// answers.
	Wait time.Duration
	// Executable is a static meshperf: the pods' sandbox image,
	// REPO/pause:TAG, is built from it (internal/kube/image) and imported
	// into the node's containerd.
	Executable string
	// ImageRepo is the images' repository (image.DefaultRepo if empty).
	ImageRepo string
	// Progress gets one line per step with its duration.
	Progress io.Writer
}

// UpResult says what Up found or did.
type UpResult struct {
	Kubeconfig string // the administrator's (system:masters)
	AlreadyUp  bool
}

// Up brings the cluster up, or finds it up. What the machine lacks is a
// *MissingError; a failure or ctx's end tears down what Up started, and the
// error then also says what teardown could not restore.
func Up(ctx context.Context, o Options) (res UpResult, err error) {
	t, err := checkMachine(o.StateDir)
	if err != nil {
		return res, err
	}
	if err := image.CheckStatic(o.Executable); err != nil {
		return res, &MissingError{Lines: []string{fmt.Sprintf("a static meshperf for the pause image: %v; %s", err, image.BuildStaticHint)}}
	}
	repo := o.ImageRepo
	if repo == "" {
		repo = image.DefaultRepo
	}
	l := layout{o.StateDir}
	res.Kubeconfig = l.kubeconfig("admin")
	if s, err := loadState(o.StateDir); err == nil {
		if dead := s.dead(); len(dead) == 0 && s.Complete {
			res.AlreadyUp = true
			return res, nil
		} else if len(dead) > 0 {
			return res, fmt.Errorf("the cluster in %s is not whole (%s not running): run `meshperf cluster down` first", o.StateDir, strings.Join(dead, ", "))
		}
		return res, fmt.Errorf("a cluster in %s is still coming up, or its `up` was killed: run `meshperf cluster down` first", o.StateDir)
	} else if !IsNoCluster(err) {
		return res, err
	}
	before, err := Snapshot()
	if err != nil {
		return res, err
	}
	if used := slices.Concat(inUse(before), cgroupsInUse(), kubeletInUse()); len(used) > 0 {
		return res, fmt.Errorf("the cluster needs %s, the link %s, the cgroup %s, kube-proxy's chains and the kubelet's socket to itself, and this host already has %s", Range, Bridge, CgroupName, strings.Join(used, "; "))
	}
	created, err := makeStateDir(o.StateDir)
	if err != nil {
		removeCreated(created)
		return res, err
	}
	// Another up may have made the same empty directory: whoever locks it
	// first brings the cluster up, the other leaves everything to it.
	unlock, err := lockStateDir(o.StateDir)
	if err != nil {
		return res, err
	}
	defer unlock()
	if err := checkEmpty(o.StateDir); err != nil {
		return res, err
	}
	s := &state{StateDir: o.StateDir, Created: created, Host: before, Started: time.Now()}
	if err := s.save(); err != nil {
		removeCreated(created)
		return res, err
	}
	caller := ctx // the wait's context below is cancelled before this runs
	defer func() {
		if err == nil {
			return
		}
		// The logs say why a component failed; they would go with the
		// state directory. An interrupted up has nothing to explain.
		if caller.Err() == nil {
			if kept, kerr := keepLogs(l); kerr == nil {
				err = fmt.Errorf("%w (the components' logs: %s)", err, kept)
			}
		}
		// A fresh context: the caller's may be what ended (Ctrl-C).
		down, derr := teardown(context.Background(), s, io.Discard)
		if derr != nil {
			err = fmt.Errorf("%w; tearing down: %v", err, derr)
		} else if len(down.Differences) > 0 {
			err = fmt.Errorf("%w; after tearing down, the host is not as it was: %s", err, strings.Join(down.Differences, "; "))
		}
	}()
	if o.Wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Wait)
		defer cancel()
	}
	u := &upper{ctx: ctx, l: l, s: s, t: t, exe: o.Executable, pauseRef: image.Ref(repo, image.Pause, "")}
	return res, runSteps(o.Progress, u.steps())
}

// step is one stage of a bring-up or teardown.
type step struct {
	what string
	do   func() error
}

// runSteps runs steps in order and prints each with its duration.
func runSteps(progress io.Writer, steps []step) error {
	if progress == nil {
		progress = io.Discard
	}
	for _, s := range steps {
		start := time.Now()
		if err := s.do(); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		fmt.Fprintf(progress, "%-44s %s\n", s.what, time.Since(start).Round(10*time.Millisecond))
	}
	return nil
}

// upper holds a bring-up's state between its steps.
type upper struct {
	ctx      context.Context
	l        layout
	s        *state
	t        tools
	exe      string // the static meshperf the pause image carries
	pauseRef string
	client   kubernetes.Interface
	caPool   *x509.CertPool
}

func (u *upper) steps() []step {
	return []step{
		{"certificates and configuration", u.writeFiles},
		{"network (" + NodeIP + " on lo, " + Bridge + ")", u.network},
		{"cgroup /" + CgroupName, u.makeCgroups},
		{"etcd", u.startEtcd},
		{"kube-apiserver", u.startAPIServer},
		{"cluster objects (CoreDNS's RBAC and Service)", func() error { return createDNSObjects(u.ctx, u.client) }},
		{"kube-controller-manager, kube-scheduler", u.startControllers},
		{"containerd", u.startContainerd},
		{"pause image " + u.pauseRef, u.importPause},
		{"kubelet (node Ready)", u.startKubelet},
		{"kube-proxy", u.startKubeProxy},
		{"CoreDNS (answering on " + DNSServiceIP + ")", u.startCoreDNS},
		{"state", func() error {
			u.s.Complete = true
			return u.s.save()
		}},
	}
}

func (u *upper) startCoreDNS() error {
	p, err := u.start("coredns", u.t.bins.Path(dist.CoreDNS), "-conf", u.l.config("Corefile"))
	if err != nil {
		return err
	}
	if err := u.waitHTTP(p, nodeURL("http", coreDNSReadyPort)+"/ready", nil); err != nil {
		return err
	}
	// A query sent before kube-proxy has written the Service's rules is
	// lost, not refused: a short wait for each answer (CoreDNS answers in
	// milliseconds here) retries it soon.
	return u.waitFor(p, "resolve kubernetes.default through "+DNSServiceIP, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, dnsAnswerWait)
		defer cancel()
		return ResolveAPIService(ctx)
	})
}

// dnsAnswerWait bounds each query of the wait for CoreDNS.
const dnsAnswerWait = 500 * time.Millisecond

func (u *upper) startEtcd() error {
	p, err := u.start("etcd", u.t.etcd, "--name", "meshperf", "--data-dir", u.l.etcdData(),
		"--listen-client-urls", etcdURL(etcdClientPort), "--advertise-client-urls", etcdURL(etcdClientPort),
		"--listen-peer-urls", etcdURL(etcdPeerPort), "--initial-advertise-peer-urls", etcdURL(etcdPeerPort),
		"--initial-cluster", "meshperf="+etcdURL(etcdPeerPort), "--log-level", "warn")
	if err != nil {
		return err
	}
	return u.waitHTTP(p, etcdURL(etcdClientPort)+"/health", nil)
}

func (u *upper) startAPIServer() error {
	pki := u.l.pki
	p, err := u.start("kube-apiserver", u.t.bins.Path(dist.APIServer),
		"--etcd-servers", etcdURL(etcdClientPort),
		"--bind-address", NodeIP, "--advertise-address", NodeIP, "--secure-port", strconv.Itoa(apiserverPort),
		"--tls-cert-file", pki("apiserver.crt"), "--tls-private-key-file", pki("apiserver.key"),
		"--client-ca-file", pki("ca.crt"),
		"--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction",
		"--service-account-issuer", "https://kubernetes.default.svc."+ClusterDomain,
		"--service-account-key-file", pki("sa.pub"), "--service-account-signing-key-file", pki("sa.key"),
		"--service-cluster-ip-range", ServiceCIDR,
		// Capture init containers are privileged, as Istio's.
		"--allow-privileged=true",
		"--kubelet-client-certificate", pki("apiserver-kubelet-client.crt"), "--kubelet-client-key", pki("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority", pki("ca.crt"),
		// logs and exec would otherwise look the node's name up.
		"--kubelet-preferred-address-types", "InternalIP")
	if err != nil {
		return err
	}
	return u.waitAPIServer(p)
}

func (u *upper) startControllers() error {
	pki := u.l.pki
	cm, err := u.start("kube-controller-manager", u.t.bins.Path(dist.ControllerManager),
		append(componentFlags("controller-manager", controllerMgrPort, u.l),
			"--use-service-account-credentials=true",
			"--service-account-private-key-file", pki("sa.key"), "--root-ca-file", pki("ca.crt"),
			"--service-cluster-ip-range", ServiceCIDR, "--allocate-node-cidrs=false")...)
	if err != nil {
		return err
	}
	sched, err := u.start("kube-scheduler", u.t.bins.Path(dist.Scheduler), componentFlags("scheduler", schedulerPort, u.l)...)
	if err != nil {
		return err
	}
	if err := u.waitHTTP(cm, nodeURL("https", controllerMgrPort)+"/healthz", u.caPool); err != nil {
		return err
	}
	return u.waitHTTP(sched, nodeURL("https", schedulerPort)+"/healthz", u.caPool)
}

func (u *upper) startContainerd() error {
	p, err := u.start("containerd", u.t.containerd, "--config", u.l.config("containerd.toml"))
	if err != nil {
		return err
	}
	return u.waitFor(p, "answer on "+u.l.containerdSocket(), func(ctx context.Context) error {
		return u.ctr(ctx, "version")
	})
}

func (u *upper) startKubelet() error {
	p, err := u.start("kubelet", u.t.bins.Path(dist.Kubelet), "--config", u.l.config("kubelet.yaml"),
		"--kubeconfig", u.l.kubeconfig("kubelet"), "--root-dir", u.l.kubeletRoot(), "--cert-dir", u.l.path("kubelet-pki"),
		"--hostname-override", NodeName, "--node-ip", NodeIP)
	if err != nil {
		return err
	}
	return u.waitFor(p, "report node "+NodeName+" Ready", func(ctx context.Context) error {
		return nodeReady(ctx, u.client)
	})
}

func (u *upper) startKubeProxy() error {
	p, err := u.start("kube-proxy", u.t.bins.Path(dist.KubeProxy), "--config", u.l.config("kube-proxy.yaml"))
	if err != nil {
		return err
	}
	return u.waitHTTP(p, nodeURL("http", kubeProxyHealthz)+"/healthz", nil)
}

func etcdURL(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }

func nodeURL(scheme string, port int) string {
	return scheme + "://" + NodeIP + ":" + strconv.Itoa(port)
}

// componentFlags are the controller manager's and the scheduler's common
// flags: their identity, serving certificate, and no leader election (one
// replica each, and no lease to wait for).
func componentFlags(name string, port int, l layout) []string {
	kc := l.kubeconfig(name)
	return []string{"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--bind-address", NodeIP, "--secure-port", strconv.Itoa(port),
		"--tls-cert-file", l.pki(name + "-serving.crt"), "--tls-private-key-file", l.pki(name + "-serving.key"),
		"--client-ca-file", l.pki("ca.crt"), "--leader-elect=false"}
}

func (u *upper) writeFiles() error {
	ca, err := writePKI(u.l.path("pki"), time.Now())
	if err != nil {
		return err
	}
	u.caPool = x509.NewCertPool()
	u.caPool.AppendCertsFromPEM(ca.CertPEM)
	if err := writeKubeconfigs(u.l); err != nil {
		return err
	}
	if err := os.MkdirAll(u.l.path("logs"), 0o755); err != nil {
		return err
	}
	return writeConfigFiles(u.l, u.pauseRef, u.t.runc)
}

// start starts a component detached and records it in the state file
// before anything waits on it.
func (u *upper) start(name, path string, args ...string) (*proc.Process, error) {
	p, err := proc.Start(proc.Spec{Name: name, Path: path, Args: args, Env: componentEnv(), LogPath: u.l.log(name), Detached: true})
	if err != nil {
		return nil, err
	}
	r, err := p.Record()
	if errors.Is(err, procstat.ErrGone) {
		// It exited at once; its log says why.
		return nil, errors.New(p.ExitReason())
	}
	if err != nil {
		// Unrecorded, teardown would not know it: it goes now.
		_ = p.Stop()
		return nil, err
	}
	u.s.Processes = append(u.s.Processes, r)
	return p, u.s.save()
}

// checkTimeout bounds one health check of a component that is coming up.
const checkTimeout = 5 * time.Second

// waitFor retries check until it succeeds, the process exits (its exit
// reason is the error), or the bring-up's time runs out.
func (u *upper) waitFor(p *proc.Process, what string, check func(context.Context) error) error {
	var last error
	// A check here is a subprocess (ctr), an API request or a DNS query:
	// every 200 ms, so that the checks leave the components the CPU.
	err := p.PollEvery(u.ctx, 200*time.Millisecond, 0, what, func() (bool, error) {
		ctx, cancel := context.WithTimeout(u.ctx, checkTimeout)
		defer cancel()
		last = check(ctx)
		return last == nil, nil
	})
	if err == nil || u.ctx.Err() == nil {
		return err
	}
	if errors.Is(u.ctx.Err(), context.Canceled) {
		return fmt.Errorf("interrupted while waiting for %s to %s", p.Name(), what)
	}
	// The log goes with the state directory at teardown: its last line is
	// kept here.
	return fmt.Errorf("%s did not %s within the wait (last: %s; its last log line: %s)", p.Name(), what, firstLine(fmt.Sprint(last)), p.LastLine())
}

// waitHTTP waits for url to answer 200, over TLS verified against pool
// if given.
func (u *upper) waitHTTP(p *proc.Process, url string, pool *x509.CertPool) error {
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	return u.waitFor(p, "answer "+url, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	})
}

func (u *upper) waitAPIServer(p *proc.Process) error {
	c, err := adminClient(u.l.dir)
	if err != nil {
		return err
	}
	u.client = c
	return u.waitFor(p, "become ready", func(ctx context.Context) error {
		_, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
}

// ctr runs containerd's ctr against this cluster's containerd.
func (u *upper) ctr(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, u.t.ctr, append([]string{"--address", u.l.containerdSocket()}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// importPause builds the sandbox image containerd was configured with
// and imports it: pods cannot start before it is on the node, as no
// registry is reachable.
func (u *upper) importPause() error {
	img, err := image.PauseImage(u.exe)
	if err != nil {
		return err
	}
	archive := u.l.path("images", "pause.tar")
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		return err
	}
	if err := image.WriteArchive(archive, u.pauseRef, img); err != nil {
		return err
	}
	return image.Import(u.ctx, u.t.ctr, u.l.containerdSocket(), archive)
}

// firstLine is s up to its first line break, cut at 200 bytes: a health
// check's error can carry a whole multi-line report.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// keepLogs copies the components' logs out of the state directory, which
// teardown removes, into a directory of their own.
func keepLogs(l layout) (string, error) {
	entries, err := os.ReadDir(l.path("logs"))
	if err != nil || len(entries) == 0 {
		return "", errors.New("no logs")
	}
	dir, err := os.MkdirTemp("", "meshperf-cluster-logs-")
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		b, err := os.ReadFile(l.path("logs", e.Name()))
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// componentEnv is the components' environment: this one, with the sbin
// directories on PATH, where the kubelet and kube-proxy find iptables and
// conntrack, and which a user's PATH may lack (syscmd looks there too).
func componentEnv() []string {
	env := os.Environ()
	for i, kv := range env {
		if path, ok := strings.CutPrefix(kv, "PATH="); ok {
			env[i] = "PATH=" + path + ":/usr/local/sbin:/usr/sbin:/sbin"
			return env
		}
	}
	return append(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
}

// Package kubetest gives tests a real Kubernetes API server of their own:
// Debian's etcd and the pinned kube-apiserver (internal/kube/dist) on free
// loopback ports, with RBAC on, an admin token in system:masters and a
// service-account signing key, so that informers, admission webhooks,
// TokenReview and TokenRequest all behave as on a cluster. There is no
// kubelet, scheduler or controller manager: pods are objects that never run,
// which is what a control plane's tests need. Starting takes seconds, so a
// test binary starts one server on first use and stops it when its tests end
// (Main, from TestMain); each test gets a namespace of its own.
//
// Without etcd (Debian's etcd-server) or the built binaries (`meshperf
// cluster build`) the test is skipped through internal/testenv.
package kubetest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/meshperf/meshperf/internal/kube/dist"
	"github.com/meshperf/meshperf/internal/kube/pki"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/testenv"
	"github.com/meshperf/meshperf/internal/testutil"
)

// ServiceCIDR is the test server's Service range: inside the RFC 2544
// benchmarking range the project keeps every cluster address in.
const ServiceCIDR = "198.18.128.0/20"

// Server is a running etcd and API server.
type Server struct {
	dir       string // temporary: certificates, keys, etcd data, logs
	etcd      *proc.Process
	apiserver *proc.Process
	host      string // https://127.0.0.1:PORT
	caPEM     []byte // signs the serving certificate
	token     string // the admin's bearer token
	next      atomic.Int64

	cmOnce sync.Once
	cm     *proc.Process // kube-controller-manager, once a test asked for it
	cmErr  error
}

var (
	mu       sync.Mutex
	shared   *Server
	startErr error
	inMain   bool
)

// Main runs a package's tests and then stops the server they shared. A
// package that uses kubetest calls it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }
//
// m may also be another package-wide runner wrapping the tests (pgtest's
// Main, say), so that a package can share both servers.
func Main(m Runner) int {
	mu.Lock()
	inMain = true
	mu.Unlock()
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		shared.stop()
		shared = nil
	}
	return code
}

// Runner runs a package's tests: a *testing.M, or RunnerFunc.
type Runner interface{ Run() int }

// RunnerFunc is a Runner that calls a function: to nest Main with another
// TestMain helper,
//
//	kubetest.Main(kubetest.RunnerFunc(func() int { return pgtest.Main(m) }))
type RunnerFunc func() int

// Run calls f.
func (f RunnerFunc) Run() int { return f() }

// Start returns the test binary's API server, starting it on first use; a
// start that failed fails every test that asks again, without retrying.
func Start(t testing.TB) *Server {
	t.Helper()
	etcd := testenv.NeedCommand(t, "etcd", "etcd-server")
	bins := testenv.NeedKubernetes(t)
	mu.Lock()
	defer mu.Unlock()
	if !inMain {
		t.Fatal("kubetest: the package's TestMain must call kubetest.Main, which stops the server after the tests")
	}
	if shared == nil && startErr == nil {
		shared, startErr = start(etcd, bins.Path(dist.APIServer))
	}
	if startErr != nil {
		t.Fatalf("kubetest: %v", startErr)
	}
	return shared
}

// Host is the API server's URL.
func (s *Server) Host() string { return s.host }

// CAPEM is the certificate that signed the API server's serving certificate.
func (s *Server) CAPEM() []byte { return s.caPEM }

// RESTConfig is a client configuration for the cluster's administrator
// (system:masters: RBAC lets it do anything).
func (s *Server) RESTConfig() *rest.Config {
	return &rest.Config{
		Host: s.host, BearerToken: s.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.caPEM},
		// Tests create objects in bursts; the default 5 QPS would make
		// them wait on the client, not on what they test.
		QPS: 200, Burst: 400,
	}
}

// Client is a typed clientset for the administrator.
func (s *Server) Client(t testing.TB) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(s.RESTConfig())
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	return c
}

// Kubeconfig writes a kubeconfig file for the administrator into t's
// temporary directory and returns its path, for code under test that takes
// --kubeconfig.
func (s *Server) Kubeconfig(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := s.writeKubeconfig(path); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	return path
}

func (s *Server) writeKubeconfig(path string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: s.host, CertificateAuthorityData: s.caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: s.token}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "admin"}
	cfg.CurrentContext = "kubetest"
	return clientcmd.WriteToFile(*cfg, path)
}

// ControllerManagerControllers are the controllers WithControllerManager
// runs: EndpointSlices of Services' ready pods, as a control plane's
// informers see them on a cluster, and namespace deletion, so that a test
// can check that what it deleted is gone.
var ControllerManagerControllers = []string{"endpointslice", "namespace"}

// WithControllerManager also runs the pinned kube-controller-manager
// (ControllerManagerControllers) against the server, from the first test
// that asks until the server stops; tests that do not ask pay nothing.
func (s *Server) WithControllerManager(t testing.TB) *Server {
	t.Helper()
	bins := testenv.NeedKubernetes(t)
	s.cmOnce.Do(func() { s.cmErr = s.startControllerManager(bins.Path(dist.ControllerManager)) })
	if s.cmErr != nil {
		t.Fatalf("kubetest: %v", s.cmErr)
	}
	if s.cm.Exited() {
		t.Fatalf("kubetest: kube-controller-manager %s", s.cm.ExitReason())
	}
	return s
}

func (s *Server) startControllerManager(path string) error {
	kubeconfig := filepath.Join(s.dir, "controller-manager.kubeconfig")
	if err := s.writeKubeconfig(kubeconfig); err != nil {
		return err
	}
	var err error
	s.cm, err = proc.Start(proc.Spec{
		Name: "kube-controller-manager", Path: path, LogPath: filepath.Join(s.dir, "kube-controller-manager.log"),
		Args: []string{"--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
			"--controllers", strings.Join(ControllerManagerControllers, ","),
			"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "0",
			"--service-account-private-key-file", filepath.Join(s.dir, "sa.key"),
			// Short syncs: a test waits on these, a cluster would not care.
			"--concurrent-service-endpoint-syncs", "10", "--endpointslice-updates-batch-period", "0s"},
		ParentDeathSignal: syscall.SIGKILL,
	})
	if err != nil {
		return err
	}
	// It has no readiness to ask for (serving is off); a start that fails
	// (a bad flag, an unreachable server) exits within a second.
	select {
	case <-s.cm.Done():
		return fmt.Errorf("kube-controller-manager %s", s.cm.ExitReason())
	case <-time.After(time.Second):
	}
	return nil
}

// NewNamespace creates a namespace with a name unique to this test binary
// (derived from t's name), with the given labels, and deletes it when t
// ends. Namespaces are how tests sharing the server stay apart.
func (s *Server) NewNamespace(t testing.TB, labels map[string]string) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%s", s.next.Add(1), dnsLabel(t.Name()))
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	c := s.Client(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := c.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("kubetest: create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		// Without a controller manager a namespace stays Terminating with
		// its objects in it; that is harmless for the next tests, which
		// use namespaces of their own.
		if err := c.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("kubetest: delete namespace %s: %v", name, err)
		}
	})
	return name
}

func dnsLabel(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, s)
	return strings.Trim(s, "-")
}

// start writes the keys and certificates, then starts etcd and the API
// server and waits until the server is ready.
func start(etcdPath, apiserverPath string) (*Server, error) {
	// etcd fsyncs every write and 3.4 cannot be told not to: on tmpfs that
	// costs nothing, on a disk it would make tests wait on it.
	base := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	dir, err := os.MkdirTemp(base, "meshperf-kubetest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	fail := func(err error) (*Server, error) {
		s.stop()
		return nil, err
	}
	if err := s.writeCredentials(); err != nil {
		return fail(err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return fail(err)
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	s.etcd, err = proc.Start(proc.Spec{
		Name: "etcd", Path: etcdPath, LogPath: filepath.Join(dir, "etcd.log"),
		Args: []string{"--name", "kubetest", "--data-dir", filepath.Join(dir, "etcd"),
			"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
			"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", "kubetest=" + peerURL, "--log-level", "warn"},
		ParentDeathSignal: syscall.SIGKILL,
	})
	if err != nil {
		return fail(err)
	}
	s.host = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	s.apiserver, err = proc.Start(proc.Spec{
		Name: "kube-apiserver", Path: apiserverPath, LogPath: filepath.Join(dir, "kube-apiserver.log"),
		Args: []string{
			"--etcd-servers", clientURL,
			"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
			"--secure-port", strconv.Itoa(ports[2]),
			"--tls-cert-file", filepath.Join(dir, "serving.crt"), "--tls-private-key-file", filepath.Join(dir, "serving.key"),
			"--token-auth-file", filepath.Join(dir, "tokens.csv"),
			"--authorization-mode", "RBAC",
			"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file", filepath.Join(dir, "sa.pub"),
			"--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
			"--service-cluster-ip-range", ServiceCIDR,
			"--allow-privileged=true",
			// No controller manager creates the default service accounts,
			// so the ServiceAccount admission plugin would refuse every
			// pod; tests that need a service account create it.
			"--disable-admission-plugins", "ServiceAccount",
		},
		ParentDeathSignal: syscall.SIGKILL,
	})
	if err != nil {
		return fail(err)
	}
	if err := s.waitReady(90 * time.Second); err != nil {
		return fail(err)
	}
	return s, nil
}

// waitReady polls /readyz until the API server answers ok, or either
// process exits.
func (s *Server) waitReady(timeout time.Duration) error {
	c, err := kubernetes.NewForConfig(s.RESTConfig())
	if err != nil {
		return err
	}
	var last error
	err = testutil.Poll(timeout, func() error {
		for _, p := range []*proc.Process{s.etcd, s.apiserver} {
			if p.Exited() {
				return nil
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, last = c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return last
	})
	for _, p := range []*proc.Process{s.etcd, s.apiserver} {
		if p.Exited() {
			return fmt.Errorf("%s %s", p.Name(), p.ExitReason())
		}
	}
	if err != nil {
		return fmt.Errorf("kube-apiserver at %s not ready after %s: %v (log: %s)", s.host, timeout, last, s.apiserver.LogPath())
	}
	return nil
}

// writeCredentials writes a CA and the serving certificate it signs, the
// admin's token, and the service-account signing key pair.
func (s *Server) writeCredentials() error {
	now := time.Now()
	ca, err := pki.NewAuthority("kubetest CA", now, 24*time.Hour)
	if err != nil {
		return err
	}
	serving, err := ca.Issue(pki.CertSpec{CommonName: "kube-apiserver", Server: true,
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost", "kubernetes.default.svc"}}, now)
	if err != nil {
		return err
	}
	saKey, saPub, err := pki.ServiceAccountKeys()
	if err != nil {
		return err
	}
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return err
	}
	s.token = fmt.Sprintf("%x", token)
	s.caPEM = ca.CertPEM
	files := map[string][]byte{
		"serving.crt": serving.CertPEM,
		"serving.key": serving.KeyPEM,
		"sa.key":      saKey,
		"sa.pub":      saPub,
		"tokens.csv":  []byte(s.token + ",admin,admin,system:masters\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(s.dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// freePorts returns n loopback ports free at the time of asking; all are
// held open together so that they differ.
func freePorts(n int) ([]int, error) {
	var ports []int
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// stop stops the API server, then etcd, and removes the directory.
func (s *Server) stop() {
	for _, p := range []*proc.Process{s.cm, s.apiserver, s.etcd} {
		if p != nil {
			_ = p.Stop()
		}
	}
	if err := os.RemoveAll(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "kubetest: remove %s: %v\n", s.dir, err)
	}
}

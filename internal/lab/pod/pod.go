package pod

import (
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"sync"

	"github.com/vishvananda/netns"

	"github.com/meshperf/meshperf/internal/proc"
)

// Pod is one workload: an address, the processes started in it, and for
// KindNetns a network namespace of its own. Its methods are safe for
// concurrent use.
type Pod struct {
	name string
	ip   netip.Addr
	kind Kind

	// Set for KindNetns only.
	nsName   string
	ns       netns.NsHandle
	hostVeth string
	adopted  bool // a namespace the lab did not make (Adopt)

	mu     sync.Mutex
	procs  []*proc.Process
	closed bool
}

// Name is the pod's name within its network.
func (p *Pod) Name() string { return p.name }

// IP is the pod's address: on the bridge for KindNetns, in 127.0.0.0/8 for
// KindLoopback.
func (p *Pod) IP() netip.Addr { return p.ip }

// Kind is the kind of the network the pod belongs to.
func (p *Pod) Kind() Kind { return p.kind }

// Netns is the namespace's name under /run/netns (for `ip netns exec NAME`),
// or "" for a loopback pod.
func (p *Pod) Netns() string { return p.nsName }

// NetnsPath is the namespace's file (what a node proxy is handed to open
// its listeners in the pod), or "" for a loopback pod or a released one.
func (p *Pod) NetnsPath() string {
	if p.nsName == "" {
		if p.kind == KindNetns && p.adopted && p.checkOpen() == nil {
			// An adopted namespace has no name of its own: its path is
			// this process's handle on it, which names that namespace
			// (whatever becomes of the process it was found through) for
			// as long as the pod is not released.
			return fmt.Sprintf("/proc/self/fd/%d", int(p.ns))
		}
		return ""
	}
	return netnsDir + "/" + p.nsName
}

// Do runs fn with the calling goroutine's view of the network being the
// pod's: sockets fn creates belong to the pod's namespace (they stay there
// after fn returns). Goroutines fn starts do not inherit the namespace. On a
// loopback pod fn simply runs.
func (p *Pod) Do(fn func() error) error {
	if p.kind != KindNetns {
		return fn()
	}
	if err := p.checkOpen(); err != nil {
		return err
	}
	return inNetns(p.ns, fn)
}

// Start starts a process in the pod through meshperf's one supervisor
// (Spec.Launch is the pod's: the child is forked inside the pod's network
// namespace), and stops it when the pod is removed.
func (p *Pod) Start(s proc.Spec) (*proc.Process, error) {
	if err := p.checkOpen(); err != nil {
		return nil, err
	}
	s.Launch = p.startIn
	c, err := proc.Start(s)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", p.name, err)
	}
	if err := p.register(c); err != nil {
		// The pod was removed while we were starting: do not leave an
		// orphan in a namespace that is going away.
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// Capture installs Istio's sidecar capture (see CaptureRules) in the pod's
// namespace, atomically: either the whole nat table is replaced or nothing
// changes. Calling it again replaces the rules.
func (p *Pod) Capture(opts CaptureOptions) error {
	if p.kind != KindNetns {
		return fmt.Errorf("pod %s: %w", p.name, ErrCaptureNeedsNetns)
	}
	if err := p.checkOpen(); err != nil {
		return err
	}
	return applyCapture(p, CaptureRules(opts))
}

// Uncapture removes either capture, the sidecar's or the in-pod one (its
// tables emptied, its route and rule removed), as when the pod loses its
// sidecar or leaves ambient.
func (p *Pod) Uncapture() error {
	if p.kind != KindNetns {
		return nil
	}
	if err := p.checkOpen(); err != nil {
		return err
	}
	return errors.Join(applyCapture(p, emptyTables), p.inpodRoute(false))
}

func (p *Pod) checkOpen() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("pod %s: already removed", p.name)
	}
	return nil
}

// register records a started process so that closing the pod stops it.
func (p *Pod) register(c *proc.Process) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("pod %s: already removed", p.name)
	}
	p.procs = append(p.procs, c)
	return nil
}

// startIn starts ec inside the pod: in its namespace for KindNetns.
func (p *Pod) startIn(ec *exec.Cmd) error {
	if p.kind != KindNetns {
		return ec.Start()
	}
	// The child is forked by the thread that inNetns has moved into the
	// pod's namespace, and a child inherits its parent thread's network
	// namespace. The alternative, `ip netns exec`, would add a dependency on
	// iproute2 and remount /sys in the child, for nothing we need.
	return inNetns(p.ns, ec.Start)
}

// stopProcesses stops every process started in the pod, concurrently so
// that grace periods overlap rather than add up.
func (p *Pod) stopProcesses() error {
	p.mu.Lock()
	procs := append([]*proc.Process(nil), p.procs...)
	p.mu.Unlock()
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, c := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Stop()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// markClosed reports whether the pod was open, and closes it for new
// commands.
func (p *Pod) markClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	was := !p.closed
	p.closed = true
	return was
}

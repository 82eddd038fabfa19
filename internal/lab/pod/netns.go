package pod

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netnsDir is where named namespaces live, as `ip netns add` makes them.
const netnsDir = "/run/netns"

// inNetns runs fn on an OS thread that has been moved into ns.
//
// A network namespace belongs to a thread, not to the process, so the thread
// must be locked for as long as it is inside ns. fn runs on a fresh goroutine
// rather than the caller's: if moving the thread back fails, that goroutine
// exits still locked, and the Go runtime then destroys the thread instead of
// handing a thread in the wrong namespace to other goroutines.
func inNetns(ns netns.NsHandle, fn func() error) error {
	result := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			result <- fmt.Errorf("read current network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			result <- fmt.Errorf("enter network namespace: %w", err)
			return
		}
		fnErr := fn()
		if err := netns.Set(orig); err != nil {
			// Stay locked: the thread dies with this goroutine.
			result <- errors.Join(fnErr, fmt.Errorf("leave network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		result <- fnErr
	}()
	return <-result
}

// prepareNetnsDir makes /run/netns a shared mount point of its own, as
// `ip netns add` does before its first namespace. Without it, the first
// `ip netns add` run afterwards (by the user, or a test beside the lab's)
// bind-mounts the directory onto itself over the namespaces already in it:
// each of those is then mounted beneath the new mount as well, unmounting
// it at the end leaves that one, and its file cannot be removed (EBUSY).
func prepareNetnsDir() error {
	if err := os.MkdirAll(netnsDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", netnsDir, err)
	}
	shared := func() error { return unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, "") }
	if err := shared(); err == nil || !errors.Is(err, unix.EINVAL) {
		return err // EINVAL: not a mount point yet
	}
	if err := unix.Mount(netnsDir, netnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mount %s onto itself: %w", netnsDir, err)
	}
	return shared()
}

// newNamedNetns creates a namespace visible as /run/netns/name, without
// leaving any thread in it (netns.NewNamed moves its caller's thread).
func newNamedNetns(name string) (netns.NsHandle, error) {
	if err := prepareNetnsDir(); err != nil {
		return netns.None(), fmt.Errorf("create network namespace %s: %w", name, err)
	}
	type res struct {
		h   netns.NsHandle
		err error
	}
	out := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			out <- res{netns.None(), fmt.Errorf("read current network namespace: %w", err)}
			return
		}
		defer orig.Close()
		h, err := netns.NewNamed(name)
		if setErr := netns.Set(orig); setErr != nil {
			if err == nil {
				h.Close()
			}
			out <- res{netns.None(), errors.Join(err, fmt.Errorf("leave new network namespace: %w", setErr))}
			return
		}
		runtime.UnlockOSThread()
		if err != nil {
			// NewNamed may leave the mount point file behind.
			_ = os.Remove(filepath.Join(netnsDir, name))
			out <- res{netns.None(), fmt.Errorf("create network namespace %s: %w", name, err)}
			return
		}
		out <- res{h, nil}
	}()
	r := <-out
	return r.h, r.err
}

// deleteNamedNetns unmounts and removes /run/netns/name; a namespace that is
// already gone is not an error.
func deleteNamedNetns(name string) error {
	p := filepath.Join(netnsDir, name)
	if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil &&
		!errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("unmount network namespace %s: %w", name, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove network namespace %s: %w", name, err)
	}
	return nil
}

// nsID identifies a namespace: the device and inode of its nsfs file.
type nsID struct{ dev, ino uint64 }

func statNS(path string) (nsID, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return nsID{}, err
	}
	return nsID{uint64(st.Dev), st.Ino}, nil
}

// processesIn lists the processes (other than this one) whose network
// namespace is one of ids.
func processesIn(ids map[nsID]bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		id, err := statNS(filepath.Join("/proc", e.Name(), "ns", "net"))
		if err != nil {
			continue // exited, or a zombie
		}
		if ids[id] {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killProcessesIn SIGKILLs every process in the namespaces ids and waits
// briefly for them to go, so that the namespaces can be freed.
func killProcessesIn(ids map[nsID]bool) []int {
	pids := processesIn(ids)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(pids) > 0 && len(processesIn(ids)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return pids
}

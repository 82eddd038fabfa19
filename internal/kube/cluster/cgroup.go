package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CgroupName is the cluster's own cgroup, at the top of every hierarchy:
// the kubelet's cgroupRoot, under which it puts kubepods and so every pod.
// Down kills and removes what is under it and nothing else, so that a
// host's kubelet (kubepods at the top) is never touched. Not the lab's
// proc.CgroupParent ("meshperf"), which `meshperf lab clean` empties.
const CgroupName = "meshperf-cluster"

// clusterCgroups are the cluster's cgroup in every hierarchy.
func clusterCgroups() []string {
	var dirs []string
	for _, h := range cgroupHierarchies() {
		dirs = append(dirs, filepath.Join(h, CgroupName))
	}
	return dirs
}

// cgroupsInUse lists the cluster's cgroups that exist already: another
// cluster's, or one a crashed `up` left; Up refuses to share them.
func cgroupsInUse() []string {
	var used []string
	for _, d := range clusterCgroups() {
		if _, err := os.Lstat(d); err == nil {
			used = append(used, "cgroup "+d)
		}
	}
	return used
}

// makeCgroups creates the cluster's cgroup in every hierarchy (the kubelet
// refuses a cgroupRoot that does not exist), recording each once made.
func (u *upper) makeCgroups() error {
	for _, d := range clusterCgroups() {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", d, err)
		}
		u.s.Cgroups = append(u.s.Cgroups, d)
		if err := u.s.save(); err != nil {
			return err
		}
	}
	return nil
}

// killCgroupProcs kills every process in the cluster's cgroups: its
// containers, which a crash may have left without their kubelet and
// shims.
func killCgroupProcs(cgroups []string) {
	for _, top := range cgroups {
		_ = filepath.WalkDir(top, func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
}

// removeCgroups removes the cluster's cgroup trees, deepest first; a
// cgroup whose processes are still exiting is retried for a few seconds.
func removeCgroups(cgroups []string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for _, top := range cgroups {
			dirs := treeDirs(top)
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
					left = append(left, dirs[i])
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cannot remove %s (processes still in it?)", strings.Join(left, ", "))
		}
		killCgroupProcs(cgroups)
		time.Sleep(100 * time.Millisecond)
	}
}

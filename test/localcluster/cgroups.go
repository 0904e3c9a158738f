package localcluster

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

// cgroupRoot is where every cluster's cgroups live, in each hierarchy: cgroupRoot/<owner
// pid>-<n>/<node>/{system,kubepods}. A node's containerd (and so its shims) is moved into
// its system group and kubelet puts pods under kubepods, so stopping a node is killing
// every process below its folder, and no container outlives its cluster.
const cgroupRoot = "/sys/fs/cgroup"

const cgroupParent = "dolphin-localcluster"

// hierarchies lists the mounted cgroup hierarchies (v1 controllers, or the v2 root).
func hierarchies() ([]string, error) {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		return []string{cgroupRoot}, nil // cgroup v2 only
	}
	ents, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return nil, fmt.Errorf("while listing cgroup hierarchies: %w", err)
	}
	var out []string
	for _, e := range ents {
		dir := filepath.Join(cgroupRoot, e.Name())
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			continue // cpu,cpuacct style links
		}
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
			out = append(out, dir)
		}
	}
	return out, nil
}

// makeCgroup creates the cgroup rel (e.g. dolphin-localcluster/123-1/node1/system) in every
// hierarchy. cpuset groups inherit their parent's CPUs and memory nodes, which v1 leaves
// empty (and an empty cpuset takes no process).
func makeCgroup(rel string) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		parts := strings.Split(rel, "/")
		for i := range parts {
			dir := filepath.Join(h, filepath.Join(parts[:i+1]...))
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("while creating cgroup %s: %w", dir, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				own := filepath.Join(dir, f)
				if b, err := os.ReadFile(own); err != nil || strings.TrimSpace(string(b)) != "" {
					continue
				}
				parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
				if err != nil {
					return fmt.Errorf("while reading the parent of %s: %w", own, err)
				}
				if err := os.WriteFile(own, parent, 0o644); err != nil {
					return fmt.Errorf("while writing %s: %w", own, err)
				}
			}
		}
	}
	return nil
}

// moveToCgroup puts a process into the cgroup rel of every hierarchy.
func moveToCgroup(rel string, pid int) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		if err := os.WriteFile(filepath.Join(h, rel, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("while moving %d into %s: %w", pid, filepath.Join(h, rel), err)
		}
	}
	return nil
}

// killCgroup kills every process below rel (SIGKILL, repeated until none is left or the
// timeout passes) and removes the groups, deepest first.
func killCgroup(rel string, timeout time.Duration) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		pids := cgroupPids(filepath.Join(hs[0], rel))
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v of cgroup %s survived SIGKILL for %s", pids, rel, timeout)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var errs []error
	for _, h := range hs {
		errs = append(errs, removeCgroupTree(filepath.Join(h, rel), deadline))
	}
	return errors.Join(errs...)
}

// cgroupPids lists the processes of dir and of every group below it.
func cgroupPids(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil //nolint:nilerr // a group removed while we walk has no process left
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil //nolint:nilerr // as above
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// removeCgroupTree removes dir's groups, children before parents. A group whose last
// process has just died can stay busy for a moment: retried until the deadline.
func removeCgroupTree(dir string, deadline time.Time) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("while listing %s: %w", dir, err)
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := removeCgroupTree(filepath.Join(dir, e.Name()), deadline); err != nil {
				return err
			}
		}
	}
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("while removing cgroup %s: %w", dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sweepCgroups kills and removes what clusters of processes that no longer exist left
// behind (a test killed by a timeout leaves its containers running).
func sweepCgroups() {
	hs, err := hierarchies()
	if err != nil || len(hs) == 0 {
		return
	}
	ents, err := os.ReadDir(filepath.Join(hs[0], cgroupParent))
	if err != nil {
		return
	}
	for _, e := range ents {
		owner, _, _ := strings.Cut(e.Name(), "-")
		pid, err := strconv.Atoi(owner)
		if err != nil || syscall.Kill(pid, 0) == nil {
			continue
		}
		_ = killCgroup(filepath.Join(cgroupParent, e.Name()), 10*time.Second)
	}
}

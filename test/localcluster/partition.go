package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	corev1 "k8s.io/api/core/v1"
)

// Partition cuts a pod off from the given addresses, both ways, with iptables rules in the
// pod's own network namespace (entered through its container's process): packets to and
// from them are dropped, so connections neither fail nor answer, as across a real
// partition. Other traffic of the pod is untouched. Heal removes the rules; it works
// after the container restarted too (the namespace is the pod sandbox's), and is a no-op
// once called.
func (c *Cluster) Partition(pod *corev1.Pod, container string, peers ...string) (heal func() error, err error) {
	pid, err := c.ContainerPID(pod, container)
	if err != nil {
		return nil, err
	}
	// An open handle keeps the namespace reachable whatever happens to the process.
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, fmt.Errorf("the network namespace of %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	rules := func(op string) error {
		var errs []error
		for _, peer := range peers {
			for _, r := range [][]string{{"INPUT", "-s", peer}, {"OUTPUT", "-d", peer}} {
				args := []string{"--net=/proc/self/fd/3", "iptables", "-w", op, r[0], r[1], r[2], "-j", "DROP"}
				cmd := exec.Command("nsenter", args...)
				cmd.ExtraFiles = []*os.File{ns}
				if out, err := cmd.CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("iptables %s %s %s in %s/%s: %w: %s", op, r[0], peer, pod.Namespace, pod.Name, err, out))
				}
			}
		}
		return errors.Join(errs...)
	}
	if err := rules("-I"); err != nil {
		_ = rules("-D")
		ns.Close()
		return nil, err
	}
	healed := false
	return func() error {
		if healed {
			return nil
		}
		healed = true
		defer ns.Close()
		return rules("-D")
	}, nil
}

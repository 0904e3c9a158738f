package topology

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/gtid"
	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// CatchUpTimeout bounds how long one pass's promotion waits for the candidate to apply
// what it received; past it the pass fails and the next one decides (and waits) again.
const CatchUpTimeout = 10 * time.Second

// act carries the decision's actions out in order and stops at the first failure. Each
// step is idempotent: the next pass, which gathers afresh, finishes an interrupted one.
// Neighbouring actions of one group run side by side (group). Once an instance has been
// made primary, its role label is set at once, before the actions after it: the primary
// Service routes to it while its replicas are being pointed at it.
func (m *Manager) act(ctx context.Context, cl *cluster, d Decision) error {
	for i := 0; i < len(d.Actions); {
		j := i + 1
		if g := group(d.Actions[i].Kind); g != 0 {
			for j < len(d.Actions) && group(d.Actions[j].Kind) == g {
				j++
			}
		}
		start := time.Now()
		if err := m.actAll(ctx, cl, d.Actions[i:j]); err != nil {
			return err
		}
		if k := d.Actions[i].Kind; k == ActBootstrap || k == ActPromote || k == ActSwitchover {
			if err := m.label(ctx, cl, d.Roles, true); err != nil {
				return err
			}
			if k == ActSwitchover {
				// From the old primary's fence to the new one's label: no instance took
				// writes, and the primary Service routed to none that would.
				cl.writesRefused = time.Since(start)
			}
		}
		i = j
	}
	return nil
}

// group says which actions may run beside their neighbours of the same group (0: none).
// A failover's freezes and its eviction each touch one instance and need no order among
// themselves, and a freeze can take seconds while its receiver tries to reach the lost
// primary (a node-loss pass that froze two one after another took 4.6 s), so run one
// after another they added those waits up. Replicas being pointed at a new primary are
// independent of each other too; an old primary's takes longest (turning its source side
// of semi-sync off took 970 ms on MySQL 9.7).
func group(k ActionKind) int {
	switch k {
	case ActFreeze, ActEvict:
		return 1
	case ActConfigureReplica:
		return 2
	case ActReloadTLS, ActApplySettings:
		return 3
	}
	return 0
}

// actAll runs the actions at once, each within its deadline, and joins their errors.
func (m *Manager) actAll(ctx context.Context, cl *cluster, actions []Action) error {
	errs := make([]error, len(actions))
	var wg sync.WaitGroup
	for k, a := range actions {
		wg.Go(func() { errs[k] = m.actOne(ctx, cl, a) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (m *Manager) actOne(ctx context.Context, cl *cluster, a Action) error {
	timeout := ActionTimeout
	if a.Kind == ActPromote || a.Kind == ActSwitchover || a.Kind == ActRetainPasswords || a.Kind == ActDiscardOldPasswords {
		timeout += CatchUpTimeout // a catch-up wait (the rotation's: replicas applying, receivers reconnecting)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	err := m.do(actx, cl, a)
	cl.timed(a, time.Since(start))
	if err != nil {
		return fmt.Errorf("%s %s: %w", a.Kind, a.Target, err)
	}
	cl.succeeded(a)
	return nil
}

func (m *Manager) do(ctx context.Context, cl *cluster, a Action) error {
	if a.Kind == ActEvict {
		return m.evictPod(ctx, cl, a.Target)
	}
	t := cl.handles[a.Target]
	if t == nil {
		return fmt.Errorf("no connection to %s", a.Target)
	}
	switch a.Kind {
	case ActBootstrap:
		if err := m.recordPrimary(ctx, cl, a.Target); err != nil {
			return err
		}
		return t.ConfigurePrimary(ctx, primaryOptions(cl))
	case ActFence:
		return fence(ctx, t)
	case ActEnsureApplication:
		if cl.application == nil {
			return fmt.Errorf("no application account to apply")
		}
		return m.applyApplication(ctx, cl, a.Target, cl.application.AccountOptions)
	case ActNarrowAccounts:
		return m.narrow(ctx, cl, t)
	case ActRetainPasswords:
		return m.retainPasswords(ctx, cl, t, a.Target)
	case ActDiscardOldPasswords:
		return m.discardOldPasswords(ctx, cl, t, a.Target)
	case ActIsolate:
		if err := t.StopReplication(ctx, true); err != nil {
			return err
		}
		return fence(ctx, t)
	case ActFreeze:
		return t.StopReplication(ctx, false)
	case ActPromote:
		if a.Failover {
			cl.failedPrimary = a.From
		}
		return m.promote(ctx, cl, t, a.Target, a.WaitFor)
	case ActConfigurePrimary:
		return t.ConfigurePrimary(ctx, primaryOptions(cl))
	case ActConfigureReplica:
		// One not yet fenced (an old primary) is fenced the careful way first:
		// ConfigureReplica's own SET super_read_only would wait on a stuck commit.
		if !cl.fenced[a.Target] {
			if err := fence(ctx, t); err != nil {
				return err
			}
		}
		return t.ConfigureReplica(ctx, m.replicaOptions(cl, a.From))
	case ActClone:
		return m.startClone(ctx, cl, t, a)
	case ActSwitchover:
		return m.switchover(ctx, cl, t, a)
	case ActReloadTLS:
		m.reloadTLS(ctx, cl, t, a.Target)
		return nil
	case ActApplySettings:
		m.applySettings(ctx, cl, t, a.Target, a.Settings)
		return nil
	}
	return fmt.Errorf("unknown action %q", a.Kind)
}

// evictPod deletes an instance's pod with a grace period of a second (never 0: that would
// remove the object without waiting for the kubelet, and the StatefulSet could start a
// second pod of the same identity beside one still running), for the pod it was read as.
func (m *Manager) evictPod(ctx context.Context, cl *cluster, name string) error {
	pod := cl.pods[name]
	if pod == nil {
		return nil
	}
	err := m.Client.Delete(ctx, pod, client.GracePeriodSeconds(evictionGrace), client.Preconditions{UID: &pod.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or already another pod
	}
	if err != nil {
		return fmt.Errorf("while evicting %s: %w", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.evicted == nil {
		m.evicted = map[string]types.UID{}
	}
	m.evicted[clusterKey(cl.obj)+name] = pod.UID
	return nil
}

// fence makes an instance read-only for everyone and ends the sessions that could still
// commit a transaction begun before (mysql's Fence says how, with commits stuck waiting for
// an acknowledgement too).
func fence(ctx context.Context, t mysql.Instance) error {
	return t.Fence(ctx, resources.AdminUser, resources.ReplicationUser)
}

// promote waits until the candidate has applied wait, records it as primary (the point of
// no return) and makes it writable.
func (m *Manager) promote(ctx context.Context, cl *cluster, t mysql.Instance, name string, wait gtid.Set) error {
	if !wait.IsEmpty() {
		if err := t.WaitForGTID(ctx, wait.String(), CatchUpTimeout); err != nil {
			return err
		}
	}
	if err := m.recordPrimary(ctx, cl, name); err != nil {
		return err
	}
	return t.ConfigurePrimary(ctx, primaryOptions(cl))
}

// switchover fences the old primary, reads what it executed (after the fence nothing more
// can commit), lets the target apply it and promotes the target. The decision's next
// actions make the old primary and the other replicas replicate from it.
func (m *Manager) switchover(ctx context.Context, cl *cluster, t mysql.Instance, a Action) error {
	old := cl.handles[a.From]
	if old == nil {
		return fmt.Errorf("no connection to %s", a.From)
	}
	if err := fence(ctx, old); err != nil {
		return err
	}
	cl.fenced[a.From] = true // its ConfigureReplica need not fence it again
	st, err := old.Status(ctx)
	if err != nil {
		return err
	}
	set, err := gtid.Parse(st.GTIDExecuted)
	if err != nil {
		return err
	}
	return m.promote(ctx, cl, t, a.Target, set)
}

func primaryOptions(cl *cluster) mysql.PrimaryOptions {
	c := cl.obj
	o := mysql.PrimaryOptions{SemiSync: semiSync(c), WaitForReplicaCount: waitForReplicas(c, int(*c.Spec.Instances)), Timeout: 24 * time.Hour}
	if to := c.Spec.Replication.SemiSync.Timeout; to != nil {
		o.Timeout = to.Duration
	}
	return o
}

func (m *Manager) replicaOptions(cl *cluster, source string) mysql.ReplicaOptions {
	host := ""
	if pod := cl.pods[source]; pod != nil {
		host = m.Addresses.Host(cl.obj, pod)
	}
	o := mysql.ReplicaOptions{SourceHost: host, SourcePort: resources.MySQLPort, User: resources.ReplicationUser,
		Password: cl.replicaPassword, SemiSync: semiSync(cl.obj), TLS: tlsEnabled(cl)}
	if o.TLS {
		// The source's certificate is checked against the cluster's CA, and its name too
		// when replicas dial DNS names (the certificate names no pod IP).
		o.TLSCAFile, o.TLSVerifyName = resources.TLSDir+"/"+resources.KeyCACert, m.Addresses != AddressPodIP
	}
	return o
}

// waitForReplicas is how many replicas' acknowledgements a commit on the primary of a
// cluster of n instances waits for: the spec's count (1 by default), at most n-1.
func waitForReplicas(c *mysqlv1beta1.MySQLCluster, n int) int {
	if w := c.Spec.Replication.SemiSync.WaitForReplicaCount; w != nil {
		return min(int(*w), n-1)
	}
	return 1
}

// semiSync is whether semi-sync should be on: enabled, and there are replicas to wait for.
func semiSync(c *mysqlv1beta1.MySQLCluster) bool {
	return (c.Spec.Replication.SemiSync.Enabled == nil || *c.Spec.Replication.SemiSync.Enabled) && *c.Spec.Instances > 1
}

func tlsEnabled(cl *cluster) bool {
	return cl.obj.Spec.TLS.Enabled == nil || *cl.obj.Spec.TLS.Enabled
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// reloadTLS has an instance load its certificate files again. A failure (files mysqld
// refuses: a key that does not match, a certificate it cannot read) is logged and told in
// a Warning Event but does not fail the pass: the instance goes on serving the certificate
// it has, and the pass's role labels and later steps must not wait on the user's files.
// It is tried again TLSReloadRetry later.
func (m *Manager) reloadTLS(ctx context.Context, cl *cluster, t mysql.Instance, name string) {
	err := t.ReloadTLS(ctx)
	m.mu.Lock()
	if m.tlsReloads == nil {
		m.tlsReloads = map[string]tlsReload{}
	}
	m.tlsReloads[clusterKey(cl.obj)+name] = tlsReload{at: m.now(), failed: err != nil}
	m.mu.Unlock()
	if err == nil {
		return
	}
	logf.FromContext(ctx).Error(err, "Certificate reload failed", "instance", name)
	if m.Recorder != nil {
		m.Recorder.Eventf(cl.obj, nil, corev1.EventTypeWarning, mysqlv1beta1.ReasonCertificateReloadFailed, string(ActReloadTLS),
			"%s still serves its previous certificate: %v", name, err)
	}
}

package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/test/ground"
)

// round is one fault: fault injects it, pokes the bystander while it holds (or, when the
// operator itself is down, once it is back), removes it, and returns when it ended. Core
// rounds guard the promises under a primary's crash and a partition, the quorum case
// included: `make test` runs them; `make test-all` runs every round.
type round struct {
	name  string
	level ground.TestLevel
	fault func(context.Context) (time.Time, error)
}

func (r *run) rounds() []round {
	return []round{
		{"kill -9 the primary", ground.Core, r.killPrimary},
		{"SIGSTOP the primary for 30 s", ground.Full, r.hangPrimary},
		{"partition primary <-> operator", ground.Full, r.partitionPrimaryFromOperator},
		{"partition primary <-> replicas", ground.Core, r.partitionPrimaryFromReplicas},
		{"partition a replica <-> operator during a failover, the other behind", ground.Core, r.partitionReplicaDuringFailover},
		{"kill the operator mid-failover", ground.Full, r.killOperatorMidFailover},
		{"kill the operator mid-clone", ground.Full, r.killOperatorMidClone},
		{"restart kube-apiserver during a switchover", ground.Full, r.restartAPIServerMidSwitchover},
		{"two spec.primary changes at once", ground.Full, r.twoSwitchovers},
	}
}

// primary is the cluster's primary now, by its status.
func (r *run) primary(ctx context.Context) (string, error) {
	c := &mysqlv1beta1.MySQLCluster{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: r.name}, c); err != nil {
		return "", err
	}
	if c.Status.CurrentPrimary == "" {
		return "", errors.New("no current primary")
	}
	return c.Status.CurrentPrimary, nil
}

func (r *run) others(primary string) []string {
	return slices.DeleteFunc(slices.Clone(r.names), func(n string) bool { return n == primary })
}

func (r *run) signalPrimary(ctx context.Context, sig syscall.Signal) (string, error) {
	p, err := r.primary(ctx)
	if err != nil {
		return "", err
	}
	pd, err := pod(ctx, r.ns, p)
	if err != nil {
		return "", err
	}
	return p, g.Signal(pd, "mysqld", "mysqld", sig)
}

func (r *run) killPrimary(ctx context.Context) (time.Time, error) {
	if _, err := r.signalPrimary(ctx, syscall.SIGKILL); err != nil {
		return time.Time{}, err
	}
	ended := time.Now()
	return ended, r.poke(ctx)
}

func (r *run) hangPrimary(ctx context.Context) (time.Time, error) {
	p, err := r.primary(ctx)
	if err != nil {
		return time.Time{}, err
	}
	pd, err := pod(ctx, r.ns, p)
	if err != nil {
		return time.Time{}, err
	}
	if err := g.Signal(pd, "mysqld", "mysqld", syscall.SIGSTOP); err != nil {
		return time.Time{}, err
	}
	start := time.Now()
	pokeErr := r.poke(ctx)
	time.Sleep(30*time.Second - time.Since(start))
	// Its liveness probe may have restarted the container meanwhile: then there is
	// nothing left to resume.
	_ = g.Signal(pd, "mysqld", "mysqld", syscall.SIGCONT)
	return time.Now(), pokeErr
}

// partition cuts pod name off from the given pods' (or the operator's) addresses for hold.
func (r *run) partition(ctx context.Context, name string, peers []string, hold time.Duration, during func() error) (time.Time, error) {
	pd, err := pod(ctx, r.ns, name)
	if err != nil {
		return time.Time{}, err
	}
	var ips []string
	for _, p := range peers {
		if p == "operator" {
			op, err := operatorPod(ctx)
			if err != nil {
				return time.Time{}, err
			}
			ips = append(ips, op.Status.PodIP)
			continue
		}
		pp, err := pod(ctx, r.ns, p)
		if err != nil {
			return time.Time{}, err
		}
		ips = append(ips, pp.Status.PodIP)
	}
	heal, err := g.Partition(pd, "mysqld", ips...)
	if err != nil {
		return time.Time{}, err
	}
	start := time.Now()
	var errs []error
	if during != nil {
		errs = append(errs, during())
	}
	errs = append(errs, r.poke(ctx))
	time.Sleep(hold - time.Since(start))
	errs = append(errs, heal())
	return time.Now(), errors.Join(errs...)
}

func (r *run) partitionPrimaryFromOperator(ctx context.Context) (time.Time, error) {
	p, err := r.primary(ctx)
	if err != nil {
		return time.Time{}, err
	}
	pd, err := pod(ctx, r.ns, p)
	if err != nil {
		return time.Time{}, err
	}
	// The evicted primary's log goes with its pod: followed, it shows how its stop went.
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	log, err := g.FollowLog(lctx, pd, "mysqld")
	if err != nil {
		return time.Time{}, err
	}
	ended, err := r.partition(ctx, p, []string{"operator"}, 15*time.Second, nil)
	for _, line := range log.Lines("dolphin:") {
		r.t.Logf("%s: %s", p, line)
	}
	return ended, err
}

func (r *run) partitionPrimaryFromReplicas(ctx context.Context) (time.Time, error) {
	p, err := r.primary(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return r.partition(ctx, p, r.others(p), 10*time.Second, nil)
}

// partitionReplicaDuringFailover lets one replica fall behind (cut off from the primary for
// a few seconds while the writer commits), then cuts the other replica off from the operator
// and hangs the primary (SIGSTOP: a killed one is back before the detection delay). With
// one acknowledgement per commit only the unreachable replica is known to hold the newest
// acknowledged writes, so the failover cannot be proved safe and must wait until that
// replica answers again. Promoting the replica that answers would lose those writes, and
// the checker would see it.
func (r *run) partitionReplicaDuringFailover(ctx context.Context) (time.Time, error) {
	p, err := r.primary(ctx)
	if err != nil {
		return time.Time{}, err
	}
	others := r.others(p)
	cut, behind := others[0], others[1]
	pp, err := pod(ctx, r.ns, p)
	if err != nil {
		return time.Time{}, err
	}
	bp, err := pod(ctx, r.ns, behind)
	if err != nil {
		return time.Time{}, err
	}
	heal, err := g.Partition(bp, "mysqld", pp.Status.PodIP)
	if err != nil {
		return time.Time{}, err
	}
	time.Sleep(3 * time.Second) // writes acknowledged by cut alone
	_, err = r.partition(ctx, cut, []string{"operator"}, 15*time.Second, func() error {
		return g.Signal(pp, "mysqld", "mysqld", syscall.SIGSTOP)
	})
	// Evicted once the failover could go on, or restarted by its liveness probe: then there
	// is nothing left to resume.
	_ = g.Signal(pp, "mysqld", "mysqld", syscall.SIGCONT)
	return time.Now(), errors.Join(err, heal())
}

// killOperator kills the manager process (kubelet restarts its container) and waits for
// the new one to answer, then pokes the bystander.
func (r *run) killOperator(ctx context.Context) (time.Time, error) {
	op, err := operatorPod(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if err := g.Signal(op, "manager", "manager", syscall.SIGKILL); err != nil {
		return time.Time{}, err
	}
	ended := time.Now()
	return ended, r.poke(ctx) // waits (bounded) for the new process to reconcile
}

func (r *run) killOperatorMidFailover(ctx context.Context) (time.Time, error) {
	if _, err := r.signalPrimary(ctx, syscall.SIGKILL); err != nil {
		return time.Time{}, err
	}
	time.Sleep(2500 * time.Millisecond) // past the detection delay: the failover has begun
	return r.killOperator(ctx)
}

// killOperatorMidClone has a replica take an errant write, allows its re-clone at 4 MiB/s
// (so it lasts), kills the operator while the clone runs, and withdraws the permission
// once the cluster is back.
func (r *run) killOperatorMidClone(ctx context.Context) (time.Time, error) {
	p, err := r.primary(ctx)
	if err != nil {
		return time.Time{}, err
	}
	target := r.others(p)[0]
	d, err := g.DB(ctx, r.ns, r.name, target)
	if err != nil {
		return time.Time{}, err
	}
	defer d.Close()
	conn, err := d.Conn(ctx)
	if err != nil {
		return time.Time{}, err
	}
	for _, stmt := range []string{"SET GLOBAL clone_max_data_bandwidth = 4", "SET GLOBAL super_read_only = OFF",
		"CREATE DATABASE IF NOT EXISTS errant"} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			conn.Close()
			return time.Time{}, err
		}
	}
	conn.Close()
	if err := r.annotate(ctx, target); err != nil {
		return time.Time{}, err
	}
	if err := ground.Poll(ctx, time.Minute, func() error {
		var state string
		if err := d.QueryRowContext(ctx, "SELECT STATE FROM performance_schema.clone_status").Scan(&state); err != nil {
			return err
		}
		if state != "In Progress" {
			return fmt.Errorf("clone %s", state)
		}
		return nil
	}); err != nil {
		return time.Time{}, fmt.Errorf("no clone into %s: %w", target, err)
	}
	ended, err := r.killOperator(ctx)
	if err != nil {
		return ended, err
	}
	if _, _, err := ready(ctx, r.ns, r.name, recoveryBound); err != nil {
		return ended, err
	}
	var n int
	if err := ground.Poll(ctx, 30*time.Second, func() error {
		return d.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'errant'").Scan(&n)
	}); err != nil {
		return ended, err
	}
	if n != 0 {
		return ended, fmt.Errorf("%s still has the errant database after its re-clone", target)
	}
	return ended, r.annotate(ctx, "")
}

func (r *run) annotate(ctx context.Context, reclone string) error {
	return r.update(ctx, func(c *mysqlv1beta1.MySQLCluster) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		if reclone == "" {
			delete(c.Annotations, "mysql.dolphin-operator.io/reclone")
		} else {
			c.Annotations["mysql.dolphin-operator.io/reclone"] = reclone
		}
	})
}

// setPrimary sets spec.primary.
func (r *run) setPrimary(ctx context.Context, name string) error {
	return r.update(ctx, func(c *mysqlv1beta1.MySQLCluster) { c.Spec.Primary = name })
}

// update changes the cluster, reading it again on a conflict (the operator writes its
// status meanwhile).
func (r *run) update(ctx context.Context, change func(*mysqlv1beta1.MySQLCluster)) error {
	return ground.Poll(ctx, 30*time.Second, func() error {
		c := &mysqlv1beta1.MySQLCluster{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: r.name}, c); err != nil {
			return err
		}
		change(c)
		return k8s.Update(ctx, c)
	})
}

func (r *run) restartAPIServerMidSwitchover(ctx context.Context) (time.Time, error) {
	p, err := r.primary(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if err := r.setPrimary(ctx, r.others(p)[0]); err != nil {
		return time.Time{}, err
	}
	if err := g.RestartAPIServer(ctx); err != nil {
		return time.Time{}, err
	}
	ended := time.Now()
	return ended, r.poke(ctx)
}

func (r *run) twoSwitchovers(ctx context.Context) (time.Time, error) {
	p, err := r.primary(ctx)
	if err != nil {
		return time.Time{}, err
	}
	o := r.others(p)
	if err := r.setPrimary(ctx, o[0]); err != nil {
		return time.Time{}, err
	}
	time.Sleep(200 * time.Millisecond)
	if err := r.setPrimary(ctx, o[1]); err != nil {
		return time.Time{}, err
	}
	ended := time.Now()
	if err := r.poke(ctx); err != nil {
		return ended, err
	}
	return ended, ground.Poll(ctx, recoveryBound, func() error {
		got, err := r.primary(ctx)
		if err != nil {
			return err
		}
		if got != o[1] {
			return fmt.Errorf("primary %q, want the last asked for, %s", got, o[1])
		}
		return nil
	})
}

package topology

import (
	"context"
	"fmt"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// DefaultCloneTimeout bounds one clone when Manager.CloneTimeout is not set.
const DefaultCloneTimeout = 2 * time.Hour

// cloneRetryDelay is how long after a clone ended another is started into the same
// instance: a clone that failed (or whose result is not visible yet, the recipient
// restarting) is not started again at once.
const cloneRetryDelay = 30 * time.Second

// cloneRun is one clone the manager started: CLONE INSTANCE runs for as long as the copy
// takes, so it runs on its own goroutine and connection, and passes only look at it
// (and at the recipient's performance_schema.clone_status).
type cloneRun struct {
	started, ended time.Time
	err            error
	cancel         context.CancelFunc
}

// cloning reports whether a clone the manager started into the instance is still running.
func (m *Manager) cloning(cl *cluster, name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	run := m.clones[clusterKey(cl.obj)+name]
	return run != nil && run.ended.IsZero()
}

// startClone readies the recipient within the pass and starts the clone itself on its own
// goroutine. It does nothing while a clone into the instance runs, and refuses to start
// another within cloneRetryDelay of the last one's end.
func (m *Manager) startClone(ctx context.Context, cl *cluster, t mysql.Instance, a Action) error {
	key := clusterKey(cl.obj) + a.Target
	m.mu.Lock()
	run := m.clones[key]
	m.mu.Unlock()
	switch {
	case run != nil && run.ended.IsZero():
		return nil
	case run != nil && m.now().Sub(run.ended) < cloneRetryDelay:
		ago := m.now().Sub(run.ended).Round(time.Second)
		if run.err != nil {
			return fmt.Errorf("the last clone into %s failed %s ago; the next starts %s after it: %w", a.Target, ago, cloneRetryDelay, run.err)
		}
		return fmt.Errorf("the last clone into %s ended %s ago and another is needed; the next starts %s after it", a.Target, ago, cloneRetryDelay)
	}
	pod, target := cl.pods[a.From], cl.pods[a.Target]
	if pod == nil || target == nil {
		return fmt.Errorf("donor %s or recipient %s has no pod", a.From, a.Target)
	}
	o := mysql.CloneOptions{DonorHost: m.Addresses.Host(cl.obj, pod), DonorPort: resources.MySQLPort,
		User: resources.ReplicationUser, Password: cl.replicaPassword, TLS: tlsEnabled(cl)}
	if o.TLS {
		o.TLSCAFile = resources.TLSDir + "/" + resources.KeyCACert // the donor's certificate is the cluster CA's
	}
	if err := t.PrepareClone(ctx, o); err != nil {
		return err
	}
	timeout := m.CloneTimeout
	if timeout <= 0 {
		timeout = DefaultCloneTimeout
	}
	// Its own connection: the statement lasts the whole copy, longer than the pooled
	// connections' IOTimeout allows.
	cfg, err := m.config(cl, a.Target)
	if err != nil {
		return err
	}
	cfg.IOTimeout = timeout
	conn, err := m.open(cfg)
	if err != nil {
		return err
	}
	base := m.base
	if base == nil {
		base = context.Background()
	}
	cctx, cancel := context.WithTimeout(logf.IntoContext(base, logf.FromContext(ctx)), timeout)
	run = &cloneRun{started: m.now(), cancel: cancel}
	m.mu.Lock()
	if m.clones == nil {
		m.clones = map[string]*cloneRun{}
	}
	m.clones[key] = run
	m.mu.Unlock()
	go func() {
		defer cancel()
		defer conn.Close()
		err := conn.Clone(cctx, o)
		if err != nil {
			logf.FromContext(cctx).Error(err, "Clone failed", "recipient", a.Target, "donor", a.From)
		}
		m.mu.Lock()
		run.ended, run.err = m.now(), err
		m.mu.Unlock()
	}()
	return nil
}

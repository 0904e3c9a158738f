package topology

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/gtid"
	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// Addresses says how replicas reach their source and a clone recipient its donor: by the
// instance's stable DNS name through the headless Service, or, for clusters without pod
// DNS, by its pod IP. The operator itself always dials the pod's IP (see connect).
type Addresses string

// Address modes.
const (
	AddressDNS   Addresses = "dns"
	AddressPodIP Addresses = "pod-ip"
)

// Host is the instance's host name or IP, "" when it has none yet.
func (a Addresses) Host(c *mysqlv1beta1.MySQLCluster, pod *corev1.Pod) string {
	if a == AddressPodIP {
		return pod.Status.PodIP
	}
	return resources.InstanceHost(c, pod.Name)
}

// config says how the operator reaches one instance as its own account.
func (m *Manager) config(cl *cluster, name string) (mysql.Config, error) {
	pod := cl.pods[name]
	if pod == nil {
		return mysql.Config{}, errNoPod
	}
	addr, err := podAddr(pod)
	if err != nil {
		return mysql.Config{}, err
	}
	// IOTimeout is the backstop behind each call's context deadline; it must exceed the
	// longest statement of a pass (a promotion's catch-up wait).
	cfg := mysql.Config{Addr: addr, User: resources.AdminUser, Password: cl.adminPassword, Timeout: DialTimeout,
		IOTimeout: CatchUpTimeout + 5*time.Second}
	if cl.tls != nil {
		// The certificate names the instance by its DNS name (a wildcard under the headless
		// Service), whatever address it is dialled at.
		cfg.TLS = &tls.Config{RootCAs: cl.tls.pool, ServerName: AddressDNS.Host(cl.obj, pod), MinVersion: tls.VersionTLS12}
	}
	return cfg, nil
}

// podAddr is where the operator dials an instance's mysqld: its pod's IP, not its DNS
// name. A lost node that ran a cluster DNS replica leaves lookups through the DNS Service
// timing out until Kubernetes marks the node NotReady (tens of seconds), and a failover
// must not wait on that. The IP comes from the pod just read; the certificate is still
// verified for the instance's name (config).
func podAddr(pod *corev1.Pod) (string, error) {
	if pod.Status.PodIP == "" {
		return "", errNoAddress
	}
	return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(resources.MySQLPort)), nil
}

func (m *Manager) open(cfg mysql.Config) (mysql.Instance, error) {
	if m.Open != nil {
		return m.Open(cfg)
	}
	return mysql.Open(cfg)
}

// connect returns a pooled connection to an instance as the operator's account.
func (m *Manager) connect(cl *cluster, name string) (mysql.Instance, error) {
	cfg, err := m.config(cl, name)
	if err != nil {
		return nil, err
	}
	// One pooled connection an instance, named by the address and credentials it was opened
	// with: a pod that moved (new IP) or a rotated password opens a new one.
	key := clusterKey(cl.obj) + name
	var ca [sha256.Size]byte
	if cl.tls != nil {
		ca = cl.tls.digest
	}
	id := fmt.Sprintf("%s|%x|%x", cfg.Addr, sha256.Sum256([]byte(cl.adminPassword)), ca)
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.conns[key]; ok && p.id == id {
		return p.conn, nil
	}
	conn, err := m.open(cfg)
	if err != nil {
		return nil, err
	}
	if m.conns == nil {
		m.conns = map[string]pooled{}
	}
	m.evict(cl, name)
	m.conns[key] = pooled{id: id, conn: conn}
	return conn, nil
}

// pooled is an instance's pooled connection and what it was opened with (address and a
// hash of the credentials and CA).
type pooled struct {
	id   string
	conn mysql.Instance
}

// evict closes and forgets the pooled connection to one instance; the caller holds m.mu.
// Keyed by instance, it costs the same with one cluster or thousands: a down instance is
// evicted on every pass.
func (m *Manager) evict(cl *cluster, name string) {
	key := clusterKey(cl.obj) + name
	if p, ok := m.conns[key]; ok {
		_ = p.conn.Close()
		delete(m.conns, key)
	}
}

type gatherError string

func (e gatherError) Error() string { return string(e) }

const (
	errNoPod     = gatherError("no pod")
	errNoAddress = gatherError("pod has no address yet")
	errDeleting  = gatherError("pod is being deleted")
)

// gather reads every instance. The recorded primary is read last: a replica's executed
// set then never holds a transaction the primary's read lacks, unless it is errant.
func (m *Manager) gather(ctx context.Context, cl *cluster) Input {
	c := cl.obj
	primary := cl.recordedPrimary()
	in := Input{Primary: primary, Desired: c.Spec.Primary, Instances: make([]Instance, len(cl.names)),
		FailoverEnabled: c.Spec.Replication.Failover.Enabled == nil || *c.Spec.Replication.Failover.Enabled,
		SemiSync:        semiSync(c),
		AckCount:        ackCount(cl),
		Reclone:         recloneAllowed(c),
		Fenced:          fenced(c),
		FailoverRequest: strings.TrimSpace(c.Annotations[mysqlv1beta1.AnnotationFailover]),
		FailedPrimary:   cl.failedPrimary,
		Leaving:         cl.leaving,
		HandOver:        cl.handOver}
	if cl.failedPrimary != "" && losslessSemiSync(c) {
		in.Reclone[cl.failedPrimary] = true
	}
	in.DetectionDelay = detectionDelay(c)
	var wg sync.WaitGroup
	var mu sync.Mutex
	read := func(k int) {
		inst := m.read(ctx, cl, cl.names[k], k)
		mu.Lock()
		in.Instances[k] = inst
		mu.Unlock()
	}
	primaryIndex := -1
	for k, name := range cl.names {
		if name == primary {
			primaryIndex = k
			continue
		}
		wg.Go(func() { read(k) })
	}
	wg.Wait()
	if primaryIndex >= 0 {
		read(primaryIndex)
	}
	m.resolveSources(cl, in.Instances)
	m.podStates(ctx, cl, in.Instances)
	return in
}

// DefaultDetectionDelay is how long a primary must be unreachable before a failover
// when spec.replication.failover.detectionDelay is not set.
const DefaultDetectionDelay = 5 * time.Second

func detectionDelay(c *mysqlv1beta1.MySQLCluster) time.Duration {
	if d := c.Spec.Replication.Failover.DetectionDelay; d != nil {
		return d.Duration
	}
	return DefaultDetectionDelay
}

// read reads one instance's state within StatusTimeout. An instance that fails is
// unreachable since the start of the first read that failed: one that hangs has stopped
// answering by then at the latest, so the detection delay runs from there.
func (m *Manager) read(ctx context.Context, cl *cluster, name string, index int) Instance {
	inst := Instance{Name: name, Index: index}
	downKey := clusterKey(cl.obj) + name
	start := m.now()
	timeout := StatusTimeout
	m.mu.Lock()
	since, down := m.down[downKey]
	m.mu.Unlock()
	if down && (name != cl.recordedPrimary() || start.Sub(since) >= detectionDelay(cl.obj)) {
		// Known down: a recovered mysqld answers well within this, a hung one never does,
		// and the passes of a failover should not each wait out StatusTimeout on it. The
		// primary keeps the whole StatusTimeout while its detection delay runs: one slowed
		// by a busy node (a fresh TLS session and the queries took a second) that missed a
		// read must get the time to answer, not be failed over for answering slowly.
		timeout = DownStatusTimeout
	}
	var conn mysql.Instance
	var err error
	if pod := cl.pods[name]; down && pod != nil && pod.DeletionTimestamp != nil {
		// Known down and its pod on the way out (an evicted primary): the passes that wait
		// for its kubelet do not ask it again. While its successor waits on it (it is the
		// recorded primary and its kubelet has not reported), they knock on its port (see
		// knock); a lost node's pod stays being deleted for as long as the node is away,
		// and is not dialled on every pass of that time.
		err = errDeleting
		if _, stopped, _ := podState(pod); name == cl.recordedPrimary() && !stopped {
			err = m.knock(ctx, pod)
		}
	} else {
		conn, err = m.connect(cl, name)
	}
	var st *mysql.Status
	if err == nil {
		sctx, cancel := context.WithTimeout(ctx, timeout)
		st, err = conn.Status(sctx)
		cancel()
	}
	if err == nil {
		err = fill(&inst, st)
	}
	if err == nil {
		m.checkTLS(cl, &inst, st)
	}
	if err == nil {
		sctx, cancel := context.WithTimeout(ctx, timeout)
		err = m.checkSettings(sctx, cl, conn, &inst)
		cancel()
	}
	if err == nil && !inst.Cloning && m.cloning(cl, name) {
		inst.Cloning = true // started by this operator, not yet visible in clone_status
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		// A pooled session may be what is wrong (one opened before its account was granted
		// keeps no global privilege): the next pass starts from fresh connections.
		m.evict(cl, name)
		since := m.markDownLocked(downKey, start)
		fault := mysql.Classify(err)
		if errors.Is(err, errNoPod) || errors.Is(err, errNoAddress) || (errors.Is(err, errDeleting) && fault != mysql.FaultRefused) {
			fault = ""
		}
		return Instance{Name: name, Index: index, Error: m.downTextLocked(downKey, fault, err.Error()), Fault: fault,
			UnreachableFor: m.now().Sub(since)}
	}
	delete(m.down, downKey)
	delete(m.downText, downKey)
	cl.handles[name] = conn
	cl.fenced[name] = st.SuperReadOnly
	return inst
}

// downTextLocked is what the status says of an unreachable instance: while it stays
// unreachable for the same kind of reason (the network: refused, no answer, dropped; or
// one error of mysqld's), the first error of that kind. Each attempt's error varies in its
// details (a refused dial times out instead when the operator is busy, an address
// changes), and a status that followed them would be rewritten on every pass of every
// cluster whose instances are down. The caller holds m.mu.
func (m *Manager) downTextLocked(key string, fault mysql.Fault, text string) string {
	kind := string(fault)
	switch fault {
	case mysql.FaultRefused, mysql.FaultNoAnswer, mysql.FaultDropped:
		kind = "network"
	case mysql.FaultRejected, mysql.FaultOther:
		kind += ": " + text // another error of mysqld's is news
	}
	if held, ok := m.downText[key]; ok && held.kind == kind {
		return held.text
	}
	if m.downText == nil {
		m.downText = map[string]downText{}
	}
	m.downText[key] = downText{kind: kind, text: text}
	return text
}

// downText is the error an unreachable instance is reported with, and its kind.
type downText struct{ kind, text string }

// markDownLocked records that the instance under key did not answer an attempt that began
// at start, and returns since when it has been unreachable: the start of the first such
// attempt without an answer in between. The caller holds m.mu.
func (m *Manager) markDownLocked(key string, start time.Time) time.Time {
	if since, ok := m.down[key]; ok {
		return since
	}
	if m.down == nil {
		m.down = map[string]time.Time{}
	}
	m.down[key] = start
	return start
}

func fill(inst *Instance, st *mysql.Status) error {
	var err error
	inst.Reachable = true
	inst.UUID = strings.ToLower(st.ServerUUID)
	inst.Writable = !st.ReadOnly && !st.SuperReadOnly
	if inst.Executed, err = gtid.Parse(st.GTIDExecuted); err != nil {
		return err
	}
	if inst.Purged, err = gtid.Parse(st.GTIDPurged); err != nil {
		return err
	}
	inst.SemiSyncSource, inst.SemiSyncReplica, inst.SemiSyncClients = st.SemiSyncSource, st.SemiSyncReplica, st.SemiSyncSourceClients
	if cs := st.Clone; cs != nil {
		inst.Cloning = cs.State == mysql.CloneInProgress
		if cs.State == mysql.CloneFailed {
			inst.CloneError = cs.Error
		}
	}
	if r := st.Replica; r != nil {
		if inst.Received, err = gtid.Parse(r.ReceivedGTIDSet); err != nil {
			return err
		}
		inst.Source = r.SourceHost // resolved to an instance name by resolveSources
		inst.IORunning, inst.SQLRunning, inst.IOConnecting = r.IORunning, r.SQLRunning, r.IOConnecting
		inst.ReplicationError = r.LastSQLError
		if inst.ReplicationError == "" && !r.IORunning {
			inst.ReplicationError = r.LastIOError
		}
	}
	return nil
}

// TLSReloadInterval is how long after a certificate reload that left an instance serving
// its old certificate the reload is tried again. The kubelet writes a renewed Secret into
// the pods' volumes some time after it changed (its sync period, a minute by default): a
// reload before that loads the old files again. A reload costs a few milliseconds.
// TLSReloadRetry is the wait after a reload that failed (files mysqld refuses).
const (
	TLSReloadInterval = 5 * time.Second
	TLSReloadRetry    = time.Minute
)

// tlsReload is the last certificate reload asked of an instance.
type tlsReload struct {
	at     time.Time
	failed bool
}

// checkTLS compares what the instance checks and serves with what the operator asks: its
// channel's checks of its source's certificate, and its certificate's expiry with the TLS
// Secret's.
func (m *Manager) checkTLS(cl *cluster, inst *Instance, st *mysql.Status) {
	if st.Replica != nil {
		inst.ChannelOutdated = !st.Replica.TLSAs(m.replicaOptions(cl, ""))
	}
	if cl.tls == nil || st.TLSNotAfter.IsZero() || st.TLSNotAfter.Equal(cl.tls.notAfter) {
		return
	}
	m.mu.Lock()
	last, tried := m.tlsReloads[clusterKey(cl.obj)+inst.Name]
	m.mu.Unlock()
	wait := TLSReloadInterval
	if last.failed {
		wait = TLSReloadRetry
	}
	inst.ReloadTLS = !tried || m.now().Sub(last.at) >= wait
}

// resolveSources turns each replica's source host into the instance it names ("?" when it
// names none of them).
func (m *Manager) resolveSources(cl *cluster, instances []Instance) {
	hosts := map[string]string{}
	for name, pod := range cl.pods {
		if h := m.Addresses.Host(cl.obj, pod); h != "" {
			hosts[h] = name
		}
	}
	for k := range instances {
		if h := instances[k].Source; h != "" {
			if name, ok := hosts[h]; ok {
				instances[k].Source = name
			} else {
				instances[k].Source = "?"
			}
		}
	}
}

// losslessSemiSync: semi-sync on, with a timeout long enough that it never fell back to
// asynchronous replication unnoticed (the default is a day; an hour is the least counted).
func losslessSemiSync(c *mysqlv1beta1.MySQLCluster) bool {
	to := c.Spec.Replication.SemiSync.Timeout
	return semiSync(c) && (to == nil || to.Duration >= time.Hour)
}

func recloneAllowed(c *mysqlv1beta1.MySQLCluster) map[string]bool {
	out := map[string]bool{}
	for _, n := range splitList(c.Annotations[AnnotationReclone]) {
		out[n] = true
	}
	return out
}

func fenced(c *mysqlv1beta1.MySQLCluster) map[string]bool {
	out := map[string]bool{}
	for _, n := range c.FencedInstances() {
		out[n] = true
	}
	return out
}

// ackCount is how many replicas acknowledge each commit: the semi-sync wait count the
// primary is configured with, 0 without semi-sync.
func ackCount(cl *cluster) int {
	if !semiSync(cl.obj) {
		return 0
	}
	return primaryOptions(cl).WaitForReplicaCount
}

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/dolphin-operator/dolphin/test/localcluster"
)

// config is one run: an operator, N clusters, whether databases refuse or drop dials.
type config struct {
	op         operator
	n          int
	silent     bool
	rate       float64       // clusters created a second
	namespaces int           // spread over this many namespaces
	settle     time.Duration // the pause between convergence and the steady window
	steady     time.Duration // the window measured after convergence
	converge   time.Duration // the longest convergence waited for
	binDir     string
	log        func(format string, args ...any)
}

// result is what one run measured.
type result struct {
	converged           int
	convergeS, p50, p95 float64
	maxS                float64
	// peakMB is the operator's peak RSS over the whole run (VmHWM), peakSteadyMB the steady
	// window's own (VmHWM reset at its start).
	peakMB, peakSteadyMB float64
	cpuConv, cpuSteady   float64
	reads, writes, disco int
	restGets, restWrites float64
	dials                int64
	reconciles           float64 // cluster reconciles in the steady window
	depthMax             float64 // the cluster workqueue's deepest sample in the steady window
	newS                 float64 // one more cluster's children, created after the window
	steadyS              float64
	// passes are Dolphin's topology passes in the window, passMax the bucket bound the
	// longest of them stayed under (-1: no such metric, another operator).
	passes, passMax float64
}

// variant is how the run's databases fail: refused or silent.
func (c config) variant() string {
	if c.silent {
		return "silent"
	}
	return "refused"
}

func (r result) line(c config) string {
	return fmt.Sprintf("scale op=%s n=%d dbs=%s converged=%d converge_s=%.1f p50_s=%.2f p95_s=%.2f max_s=%.2f new_s=%.2f "+
		"peak_rss_mb=%.0f peak_rss_steady_mb=%.0f cpu_s_conv=%.1f cpu_s_steady=%.1f steady_s=%.0f "+
		"reads_5m=%d writes_5m=%d discovery_5m=%d rest_gets_5m=%.0f rest_writes_5m=%.0f dials_5m=%d "+
		"reconciles_5m=%.0f queue_depth_max=%.0f passes_5m=%.0f pass_max_s=%g",
		c.op.name, c.n, c.variant(), r.converged, r.convergeS, r.p50, r.p95, r.maxS, r.newS,
		r.peakMB, r.peakSteadyMB, r.cpuConv, r.cpuSteady, r.steadyS,
		per5m(float64(r.reads), r.steadyS), per5m(float64(r.writes), r.steadyS), per5m(float64(r.disco), r.steadyS),
		per5mF(r.restGets, r.steadyS), per5mF(r.restWrites, r.steadyS), int64(per5mF(float64(r.dials), r.steadyS)),
		per5mF(r.reconciles, r.steadyS), r.depthMax, per5mF(r.passes, r.steadyS), r.passMax)
}

// per5m scales a count of the steady window to 300 s (the window is 300 s unless shortened).
func per5m(v, window float64) int { return int(per5mF(v, window) + 0.5) }
func per5mF(v, window float64) float64 {
	if window <= 0 {
		return 0
	}
	return v * 300 / window
}

// keepAudit, when set, is where each run's audit log is copied (a file a run, suffixed).
var keepAudit = os.Getenv("BENCH_SCALE_KEEP_AUDIT")

// profileDir, when set, receives a 60 s CPU profile from the first create (convergence),
// a 30 s one from the start of each steady window and a heap profile from its end (both
// operators serve Go's pprof on pprofAddr).
var profileDir = os.Getenv("BENCH_SCALE_PROFILE")

func profile(ctx context.Context, c config, what, name string) {
	// Longer than the longest profile asked for (60 s) and its transfer.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pprofAddr+"/debug/pprof/"+what, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.log("profile %s: %v", name, err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	_ = os.WriteFile(filepath.Join(profileDir, fmt.Sprintf("%s-%d-%s-%s.pprof", c.op.name, c.n, c.variant(), name)), b, 0o600)
}

// run measures one (operator, N, variant) on a fresh control plane.
func run(ctx context.Context, c config) (res result, err error) {
	cl, err := localcluster.Start(ctx, localcluster.Config{
		BinDir: c.binDir, CRDPaths: c.op.crds, Nodes: 0,
		KwokPods: 3*c.n + 100, ControllerManagerQPS: 200, AuditPolicy: []byte(auditPolicy(keepAudit != "")),
	})
	if err != nil {
		return res, err
	}
	defer cl.Stop()
	cs, err := kubernetes.NewForConfig(cl.RESTConfig())
	if err != nil {
		return res, err
	}
	if err := databasesAnswer(c.silent); err != nil {
		return res, err
	}
	defer func() { _ = databasesAnswer(false) }()
	user := "bench:" + c.op.name
	if err := grant(ctx, cs, c.op, user, c.namespaces); err != nil {
		return res, err
	}
	dir := filepath.Join(cl.Dir(), "operator")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}
	if err := c.op.prepare(dir); err != nil {
		return res, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cl.WriteKubeconfigAs(kubeconfig, user); err != nil {
		return res, err
	}
	proc, err := cl.Run(c.op.name, c.op.bin, append([]string{"KUBECONFIG=" + kubeconfig}, c.op.env...), c.op.args(dir)...)
	if err != nil {
		return res, err
	}
	if err := waitReady(ctx, proc); err != nil {
		return res, err
	}
	w := newWatcher(cs)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w.start(wctx)
	dyn, err := dynamic.NewForConfig(cl.RESTConfig())
	if err != nil {
		return res, err
	}
	return measure(ctx, c, cl, proc, w, dyn, user)
}

// measure creates the workload, waits for convergence, then samples the steady window.
func measure(ctx context.Context, c config, cl *localcluster.Cluster, proc *localcluster.Process,
	w *watcher, dyn dynamic.Interface, user string) (res result, err error) {
	pid := proc.PID()
	before, err := sampleProc(pid)
	if err != nil {
		return res, err
	}
	first := time.Now()
	if profileDir != "" {
		go profile(ctx, c, "profile?seconds=60", "converge-cpu")
	}
	if err := create(ctx, c, dyn, w, 0, c.n); err != nil {
		return res, err
	}
	c.log("%s n=%d: %d clusters created in %s", c.op.name, c.n, c.n, time.Since(first).Round(time.Millisecond))
	last, lat := w.waitConverged(ctx, c.n, c.converge, proc, c.log)
	res.converged = len(lat)
	res.convergeS = last.Sub(first).Seconds()
	res.p50, res.p95, res.maxS = quantile(lat, 0.5), quantile(lat, 0.95), quantile(lat, 1)
	conv, err := sampleProc(pid)
	if err != nil {
		return res, err
	}
	res.cpuConv = conv.cpu - before.cpu
	// Children exist before the pods are Ready and the statuses say so: the window starts
	// once they are.
	if err := settle(ctx, c, w.cs); err != nil {
		return res, err
	}
	// The peak so far (convergence and the pods turning Ready), before the window's own.
	pre, err := sampleProc(pid)
	if err != nil {
		return res, err
	}
	res.peakMB = pre.hwmMB
	if err := resetPeak(pid); err != nil {
		return res, err
	}
	if err := steady(ctx, c, cl, pid, user, &res); err != nil {
		return res, err
	}
	// One more cluster while the others idle: how soon its children exist.
	if err := create(ctx, c, dyn, w, c.n, 1); err != nil {
		return res, err
	}
	_, lat = w.waitConverged(ctx, c.n+1, 2*time.Minute, proc, c.log)
	if len(lat) == c.n+1 {
		res.newS = w.latencyOf(c.clusterName(c.n))
	} else {
		res.newS = -1
	}
	return res, proc.Exited()
}

// settle waits until the ground is still: every instance's pod Ready (the controller
// manager, the scheduler and kwok take minutes to catch up with thousands of pods, and each
// pod turning Ready changes its cluster's status), then c.settle, then until the operator's
// cluster workqueue is empty; each wait at most 10 minutes (a ground that never settles is
// measured as it is, and the log says so).
func settle(ctx context.Context, c config, cs kubernetes.Interface) error {
	if err := until(ctx, c, "every pod Ready", func() (bool, error) {
		lctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		pods, err := cs.CoreV1().Pods("").List(lctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range pods.Items {
			for _, cond := range pods.Items[i].Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= 3*c.n, nil
	}); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(c.settle):
	}
	return until(ctx, c, "an empty workqueue", func() (bool, error) {
		m, err := scrape(ctx)
		if err != nil {
			return false, err
		}
		return sum(m, "workqueue_depth", "name", c.op.workqueue) == 0, nil
	})
}

// until polls done every 5 s for at most 10 minutes.
func until(ctx context.Context, c config, what string, done func() (bool, error)) error {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
	c.log("%s n=%d: not %s after 10 minutes; measured as it is", c.op.name, c.n, what)
	return nil
}

// snapshot is what the operator's counters say at one moment.
type snapshot struct {
	metrics families
	proc    procSample
	dials   int64
}

func takeSnapshot(ctx context.Context, pid int) (snapshot, error) {
	var s snapshot
	var err error
	if s.metrics, err = scrape(ctx); err != nil {
		return s, err
	}
	if s.proc, err = sampleProc(pid); err != nil {
		return s, err
	}
	s.dials, err = activeOpens()
	return s, err
}

// steady samples the operator over the steady window.
func steady(ctx context.Context, c config, cl *localcluster.Cluster, pid int, user string, res *result) error {
	s0, err := takeSnapshot(ctx, pid)
	if err != nil {
		return err
	}
	from := time.Now()
	if profileDir != "" {
		go profile(ctx, c, "profile?seconds=30", "cpu")
	}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for time.Since(from) < c.steady {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if m, err := scrape(ctx); err == nil {
			res.depthMax = max(res.depthMax, sum(m, "workqueue_depth", "name", c.op.workqueue))
		}
	}
	to := time.Now()
	if profileDir != "" {
		profile(ctx, c, "heap", "heap")
	}
	s1, err := takeSnapshot(ctx, pid)
	if err != nil {
		return err
	}
	m0, m1, p0, p1 := s0.metrics, s1.metrics, s0.proc, s1.proc
	res.steadyS = to.Sub(from).Seconds()
	res.cpuSteady, res.peakSteadyMB = p1.cpu-p0.cpu, p1.hwmMB
	res.peakMB = max(res.peakMB, p1.hwmMB)
	res.dials = s1.dials - s0.dials
	delta := func(metric string, labels ...string) float64 {
		return sum(m1, metric, labels...) - sum(m0, metric, labels...)
	}
	res.restGets = delta("rest_client_requests_total", "method", "GET")
	res.restWrites = delta("rest_client_requests_total") - res.restGets
	res.reconciles = delta("controller_runtime_reconcile_total", "controller", c.op.workqueue)
	res.passes, res.passMax = passes(m0, m1)
	// The audit log's last lines of the window are written as their requests end.
	time.Sleep(2 * time.Second)
	a, err := countAudit(cl.AuditLogPath(), user, from, to)
	if err != nil {
		return err
	}
	res.reads, res.writes, res.disco = a.reads(), a.writes(), a.discovery
	if keepAudit != "" {
		if b, err := os.ReadFile(cl.AuditLogPath()); err == nil {
			_ = os.WriteFile(fmt.Sprintf("%s.%s-%d", keepAudit, c.op.name, c.n), b, 0o600)
		}
	}
	c.log("%s n=%d steady window: %s", c.op.name, c.n, a.top(8))
	return nil
}

func (c config) clusterName(i int) string { return fmt.Sprintf("c%04d", i) }
func (c config) namespaceOf(i int) string { return fmt.Sprintf("bench-%d", i%c.namespaces) }

// create makes clusters from..from+n at the configured rate, each create on its own
// goroutine (at most 64 outstanding), so that a slow API server does not slow the rate
// the workload arrives at.
func create(ctx context.Context, c config, dyn dynamic.Interface, w *watcher, from, n int) error {
	interval := time.Duration(float64(time.Second) / c.rate)
	next := time.Now()
	slots := make(chan struct{}, 64)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := from; i < from+n; i++ {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		ns, name := c.namespaceOf(i), c.clusterName(i)
		obj, err := c.op.cluster(ns, name, i)
		if err != nil {
			return err
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			sent := time.Now()
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			got, err := dyn.Resource(c.op.gvr).Namespace(ns).Create(cctx, obj, metav1.CreateOptions{})
			if err != nil {
				errs <- fmt.Errorf("while creating cluster %s/%s: %w", ns, name, err)
				return
			}
			w.created(got.GetUID(), name, sent)
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// passHistogram is Dolphin's topology pass duration: a cluster is visited again at most
// PollInterval (1 s) after its pass ends, so the longest pass bounds every cluster's visit
// interval.
const passHistogram = "dolphin_topology_pass_duration_seconds"

// passes is how many topology passes ran between two scrapes and the smallest bucket bound
// every one of them stayed under (-1 without the metric; +Inf when one outran every bucket).
func passes(m0, m1 families) (float64, float64) {
	h1 := m1[passHistogram].GetMetric()
	if len(h1) == 0 {
		return 0, -1
	}
	before := map[float64]uint64{}
	var count0 uint64
	if h0 := m0[passHistogram].GetMetric(); len(h0) > 0 {
		count0 = h0[0].GetHistogram().GetSampleCount()
		for _, b := range h0[0].GetHistogram().GetBucket() {
			before[b.GetUpperBound()] = b.GetCumulativeCount()
		}
	}
	total := h1[0].GetHistogram().GetSampleCount() - count0
	best := math.Inf(1)
	for _, b := range h1[0].GetHistogram().GetBucket() {
		if b.GetCumulativeCount()-before[b.GetUpperBound()] >= total && b.GetUpperBound() < best {
			best = b.GetUpperBound()
		}
	}
	return float64(total), best
}

// quantile of the latencies (q 1: the largest); 0 with none.
func quantile(lat []float64, q float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	s := append([]float64(nil), lat...)
	sort.Float64s(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// grant creates the operator's namespace and the workload's, its ClusterRole and
// leader-election Role from its own manifests, bound to user.
func grant(ctx context.Context, cs kubernetes.Interface, op operator, user string, namespaces int) error {
	nss := []string{op.namespace}
	for i := range namespaces {
		nss = append(nss, fmt.Sprintf("bench-%d", i))
	}
	for _, ns := range nss {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("while creating namespace %s: %w", ns, err)
		}
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	for _, path := range op.rbac {
		docs, err := readDocs(path)
		if err != nil {
			return err
		}
		for _, d := range docs {
			if err := grantOne(ctx, cs, op.namespace, d, subject); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	return nil
}

func grantOne(ctx context.Context, cs kubernetes.Interface, ns string, doc []byte, subject []rbacv1.Subject) error {
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return err
	}
	switch meta.Kind {
	case "ClusterRole":
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal(doc, &r); err != nil {
			return err
		}
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &r, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: r.Name}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.Name},
		}, metav1.CreateOptions{})
		return err
	case "Role":
		var r rbacv1.Role
		if err := yaml.Unmarshal(doc, &r); err != nil {
			return err
		}
		r.Namespace = ns
		if _, err := cs.RbacV1().Roles(ns).Create(ctx, &r, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: ns}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.Name},
		}, metav1.CreateOptions{})
		return err
	}
	return nil
}

func readDocs(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var docs [][]byte
	for {
		d, err := r.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			return nil, fmt.Errorf("while reading %s: %w", path, err)
		}
		if strings.TrimSpace(string(d)) != "" {
			docs = append(docs, d)
		}
	}
}

// databasesAnswer makes every pod address (kwok's pods run nothing) local, so that a
// dial to a database is refused at once, as by a pod whose mysqld is not up; silent
// drops the SYNs to MySQL's ports instead, as a partitioned node does.
func databasesAnswer(silent bool) error {
	_, _ = netCmd("ip", "route", "del", "local", localcluster.PodCIDR, "dev", "lo")
	// Dropped on the way in: a locally sent packet dropped on its way out fails connect()
	// at once (EPERM), which is not what a silent network does.
	drop := []string{"INPUT", "-p", "tcp", "-d", localcluster.PodCIDR, "-m", "multiport", "--dports", "3306,33062", "-j", "DROP"}
	for range 10 { // each -D removes one copy; a run adds at most one
		if _, err := netCmd("iptables", append([]string{"-D"}, drop...)...); err != nil {
			break
		}
	}
	if out, err := netCmd("ip", "route", "add", "local", localcluster.PodCIDR, "dev", "lo"); err != nil {
		return fmt.Errorf("while routing pod addresses locally: %s: %w", out, err)
	}
	if silent {
		if out, err := netCmd("iptables", append([]string{"-A"}, drop...)...); err != nil {
			return fmt.Errorf("while dropping dials to MySQL: %s: %w", out, err)
		}
	}
	return nil
}

// netCmd runs ip or iptables, bounded by 10 s.
func netCmd(name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, name, args...).CombinedOutput()
}

// waitReady waits until the operator's readiness endpoint answers.
func waitReady(ctx context.Context, proc *localcluster.Process) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if err := proc.Exited(); err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+probeAddr+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("the operator was not ready within 2 minutes:\n%s", proc.LogTail())
}

// watcher records when each cluster was created and when each kind of its children
// (StatefulSet, Service, Secret, ConfigMap, by controller owner) was first seen.
type watcher struct {
	cs       kubernetes.Interface
	mu       sync.Mutex
	cond     *sync.Cond
	names    map[types.UID]string
	createAt map[types.UID]time.Time
	seen     map[types.UID]map[string]time.Time
	done     map[types.UID]time.Time
}

var childKinds = []string{"StatefulSet", "Service", "Secret", "ConfigMap"}

func newWatcher(cs kubernetes.Interface) *watcher {
	w := &watcher{cs: cs, names: map[types.UID]string{}, createAt: map[types.UID]time.Time{},
		seen: map[types.UID]map[string]time.Time{}, done: map[types.UID]time.Time{}}
	w.cond = sync.NewCond(&w.mu)
	return w
}

func (w *watcher) start(ctx context.Context) {
	f := informers.NewSharedInformerFactory(w.cs, 0)
	add := func(kind string, inf cache.SharedIndexInformer) {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			if m, ok := obj.(metav1.Object); ok {
				if ref := metav1.GetControllerOf(m); ref != nil {
					w.child(ref.UID, kind, time.Now())
				}
			}
		}})
	}
	add("StatefulSet", f.Apps().V1().StatefulSets().Informer())
	add("Service", f.Core().V1().Services().Informer())
	add("Secret", f.Core().V1().Secrets().Informer())
	add("ConfigMap", f.Core().V1().ConfigMaps().Informer())
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
}

func (w *watcher) created(uid types.UID, name string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.names[uid], w.createAt[uid] = name, at
	w.check(uid)
}

func (w *watcher) child(owner types.UID, kind string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[owner] == nil {
		w.seen[owner] = map[string]time.Time{}
	}
	if _, ok := w.seen[owner][kind]; !ok {
		w.seen[owner][kind] = at
	}
	w.check(owner)
}

// check marks a cluster converged once it is created and every child kind was seen.
func (w *watcher) check(uid types.UID) {
	if _, ok := w.createAt[uid]; !ok || !w.done[uid].IsZero() {
		return
	}
	var last time.Time
	for _, k := range childKinds {
		t, ok := w.seen[uid][k]
		if !ok {
			return
		}
		if t.After(last) {
			last = t
		}
	}
	w.done[uid] = last
	w.cond.Broadcast()
}

func (w *watcher) latencyOf(name string) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	for uid, n := range w.names {
		if n == name && !w.done[uid].IsZero() {
			return w.done[uid].Sub(w.createAt[uid]).Seconds()
		}
	}
	return -1
}

// waitConverged waits (at most limit) until n clusters converged; it returns the last
// convergence time and every converged cluster's latency (children complete - created,
// never below zero: a child seen before the create call returned counts as at once).
func (w *watcher) waitConverged(ctx context.Context, n int, limit time.Duration, proc *localcluster.Process,
	log func(string, ...any)) (time.Time, []float64) {
	deadline := time.Now().Add(limit)
	stop := make(chan struct{})
	defer close(stop)
	go func() { // wake the wait below every second, to check the deadline and the operator
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				w.cond.Broadcast()
			}
		}
	}()
	w.mu.Lock()
	defer w.mu.Unlock()
	lastLog := time.Now()
	for len(w.done) < n && time.Now().Before(deadline) && ctx.Err() == nil && proc.Exited() == nil {
		if time.Since(lastLog) > 30*time.Second {
			log("  %d/%d converged", len(w.done), n)
			lastLog = time.Now()
		}
		w.cond.Wait()
	}
	var last time.Time
	lat := make([]float64, 0, len(w.done))
	for uid, t := range w.done {
		if t.After(last) {
			last = t
		}
		lat = append(lat, max(t.Sub(w.createAt[uid]).Seconds(), 0))
	}
	return last, lat
}

package localcluster

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/dolphin-operator/dolphin/test/mysqld"
)

// DefaultPodSelector picks the pods the runner serves: the label every MySQL pod of a
// MySQLCluster carries.
const DefaultPodSelector = "app.kubernetes.io/name=mysql"

// MySQLPort is where each pod's mysqld listens on the pod's IP.
const MySQLPort = 3306

// PodRunnerOptions configure the pod runner.
type PodRunnerOptions struct {
	// MySQL is the server install; required.
	MySQL *mysqld.Install
	// Selector picks the pods to run mysqld for; default DefaultPodSelector.
	Selector string
	// ExtraArgs returns more mysqld options for a pod (after the runner's own).
	ExtraArgs func(*corev1.Pod) []string
	// Init runs once on a pod's new data folder, after its mysqld first started, as an
	// init container would have prepared it (accounts, say).
	Init func(context.Context, *corev1.Pod, *mysqld.Instance) error
	// Log receives one line per start, exit and stop; default: discarded.
	Log io.Writer
}

// PodRunner plays the container runtime for MySQL pods on the fake node: for each such
// pod that is Running with an IP it starts one real mysqld bound to <pod IP>:3306, named
// after the pod (@@hostname), its data on the pod's first PersistentVolumeClaim (so a pod
// deleted and recreated by its StatefulSet finds its data again), restarted whenever it
// exits, as a kubelet restarts a container; it stops mysqld when the pod goes away.
type PodRunner struct {
	opts     PodRunnerOptions
	cs       kubernetes.Interface
	podsDir  string
	cancel   context.CancelFunc
	mu       sync.Mutex
	running  map[types.UID]*podInstance
	leaving  map[string]chan struct{} // pod IP -> closed when the mysqld that had it stopped
	wg       sync.WaitGroup
	stopping bool
}

type podInstance struct {
	ip    string
	gone  chan struct{} // closed once its mysqld has stopped for good
	key   types.NamespacedName
	ready chan struct{} // closed when start-up has finished, well or not
	inst  *mysqld.Instance
	err   error
}

// StartPodRunner starts the runner; Stop (or Cluster.Stop) ends it and its servers.
func (c *Cluster) StartPodRunner(opts PodRunnerOptions) (*PodRunner, error) {
	if opts.MySQL == nil {
		return nil, errors.New("localcluster: PodRunnerOptions.MySQL is required")
	}
	if opts.Selector == "" {
		opts.Selector = DefaultPodSelector
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	sel, err := labels.Parse(opts.Selector)
	if err != nil {
		return nil, fmt.Errorf("localcluster: pod selector %q: %w", opts.Selector, err)
	}
	cs, err := kubernetes.NewForConfig(c.restConfig)
	if err != nil {
		return nil, fmt.Errorf("while creating a client: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &PodRunner{opts: opts, cs: cs, podsDir: filepath.Join(c.cfg.Dir, "pods"), cancel: cancel,
		running: map[types.UID]*podInstance{}, leaving: map[string]chan struct{}{}}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel.String() }))
	_, _ = f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.observe(ctx, o) },
		UpdateFunc: func(_, o any) { r.observe(ctx, o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				r.release(p.UID)
			}
		},
	})
	f.Start(ctx.Done())
	c.runner = r
	return r, nil
}

// observe starts mysqld for a pod that runs and stops it for a pod being deleted.
func (r *PodRunner) observe(ctx context.Context, o any) {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		r.release(pod.UID)
		return
	}
	if pod.Status.PodIP == "" || pod.Spec.NodeName == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping || r.running[pod.UID] != nil {
		return
	}
	pi := &podInstance{key: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, ready: make(chan struct{}),
		ip: pod.Status.PodIP, gone: make(chan struct{})}
	// kwok hands a deleted pod's IP to the next pod at once: the new mysqld must wait
	// until the old one has let go of the address.
	previous := r.leaving[pi.ip]
	r.running[pod.UID] = pi
	r.wg.Go(func() {
		defer close(pi.ready)
		if previous != nil {
			<-previous
		}
		pi.inst, pi.err = r.start(ctx, pod)
		if pi.err != nil {
			fmt.Fprintf(r.opts.Log, "podrunner: %s: %v\n", pi.key, pi.err)
		}
	})
}

func (r *PodRunner) start(ctx context.Context, pod *corev1.Pod) (*mysqld.Instance, error) {
	dir, err := r.dataDir(ctx, pod)
	if err != nil {
		return nil, err
	}
	var extra []string
	if r.opts.ExtraArgs != nil {
		extra = r.opts.ExtraArgs(pod)
	}
	fmt.Fprintf(r.opts.Log, "podrunner: starting mysqld for %s/%s on %s:%d (%s)\n",
		pod.Namespace, pod.Name, pod.Status.PodIP, MySQLPort, dir)
	_, statErr := os.Stat(filepath.Join(dir, "data", "mysql.ibd"))
	inst, err := r.opts.MySQL.Start(ctx, mysqld.Options{
		Dir:        dir,
		Address:    pod.Status.PodIP,
		Port:       MySQLPort,
		ServerID:   serverID(pod),
		ReportHost: pod.Status.PodIP,
		Hostname:   pod.Name,
		Restart:    mysqld.RestartAlways,
		ExtraArgs:  extra,
		Log:        r.opts.Log,
	})
	if err != nil || r.opts.Init == nil || statErr == nil {
		return inst, err
	}
	if err := r.opts.Init(ctx, pod, inst); err != nil {
		return inst, fmt.Errorf("while initialising the data folder of %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return inst, nil
}

// dataDir is <volume>/mysql for the pod's first claim, else a folder of the pod's own.
func (r *PodRunner) dataDir(ctx context.Context, pod *corev1.Pod) (string, error) {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		deadline := time.Now().Add(time.Minute)
		for {
			path, err := volumePath(ctx, r.cs, pod.Namespace, v.PersistentVolumeClaim.ClaimName)
			if err != nil {
				return "", err
			}
			if path != "" {
				return filepath.Join(path, "mysql"), nil
			}
			if time.Now().After(deadline) {
				return "", fmt.Errorf("claim %s is not bound", v.PersistentVolumeClaim.ClaimName)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return filepath.Join(r.podsDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID)), nil
}

// serverID is stable per pod name: a StatefulSet pod keeps its identity across restarts.
func serverID(pod *corev1.Pod) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(pod.Namespace + "/" + pod.Name))
	return h.Sum32()%4_000_000_000 + 1
}

// release stops the mysqld of a pod that is gone.
func (r *PodRunner) release(uid types.UID) {
	r.mu.Lock()
	pi := r.running[uid]
	delete(r.running, uid)
	if pi != nil {
		r.leaving[pi.ip] = pi.gone
	}
	r.mu.Unlock()
	if pi == nil {
		return
	}
	r.wg.Go(func() {
		defer func() {
			r.mu.Lock()
			if r.leaving[pi.ip] == pi.gone {
				delete(r.leaving, pi.ip)
			}
			r.mu.Unlock()
			close(pi.gone)
		}()
		<-pi.ready
		if pi.inst != nil {
			fmt.Fprintf(r.opts.Log, "podrunner: stopping mysqld for %s\n", pi.key)
			pi.inst.Stop()
		}
	})
}

// Instance returns the mysqld serving a pod, waiting for its start-up to finish.
func (r *PodRunner) Instance(ctx context.Context, namespace, name string) (*mysqld.Instance, error) {
	for {
		r.mu.Lock()
		var pi *podInstance
		for _, p := range r.running {
			if p.key.Namespace == namespace && p.key.Name == name {
				pi = p
			}
		}
		r.mu.Unlock()
		if pi != nil {
			select {
			case <-pi.ready:
				return pi.inst, pi.err
			case <-ctx.Done():
				return nil, fmt.Errorf("while waiting for mysqld of %s/%s: %w", namespace, name, ctx.Err())
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no mysqld for pod %s/%s: %w", namespace, name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// DB opens a root connection to the mysqld serving a pod, once it has started.
func (r *PodRunner) DB(ctx context.Context, namespace, name string) (*sql.DB, error) {
	inst, err := r.Instance(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return inst.DB()
}

// Running lists the pods (namespace/name) that have a mysqld, started or starting.
func (r *PodRunner) Running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.running))
	for _, p := range r.running {
		out = append(out, p.key.String())
	}
	return out
}

// Stop stops every mysqld the runner started and the runner itself.
func (r *PodRunner) Stop() {
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		return
	}
	r.stopping = true
	uids := make([]types.UID, 0, len(r.running))
	for uid := range r.running {
		uids = append(uids, uid)
	}
	r.mu.Unlock()
	r.cancel()
	for _, uid := range uids {
		r.release(uid)
	}
	r.wg.Wait()
}

package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/gtid"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// statusTimeout bounds a whole status command: the reads from the API server and every
// instance's exec (those run side by side).
const statusTimeout = 45 * time.Second

// Report is what status shows of one cluster; -o json and -o yaml print it as is.
type Report struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Phase     string `json:"phase"`
	// Ready is the Ready condition's status (True, False, Unknown; empty before the first).
	Ready          string `json:"ready"`
	Version        string `json:"version,omitempty"`
	Instances      int32  `json:"instances"`
	ReadyInstances int32  `json:"readyInstances"`
	Primary        string `json:"primary,omitempty"`
	// DesiredPrimary is spec.primary: a switchover asked for while it differs from Primary.
	DesiredPrimary string                        `json:"desiredPrimary,omitempty"`
	Paused         bool                          `json:"paused,omitempty"`
	Endpoints      mysqlv1beta1.ClusterEndpoints `json:"endpoints"`
	Backup         mysqlv1beta1.BackupStatus     `json:"backup"`
	Rollout        *mysqlv1beta1.RolloutStatus   `json:"rollout,omitempty"`
	Conditions     []metav1.Condition            `json:"conditions,omitempty"`
	// History is status.history, the operator's last actions on the instances; only
	// status of a single cluster fills it.
	History []mysqlv1beta1.HistoryEntry `json:"history,omitempty"`
	// Members are the instances, by ordinal; only status of a single cluster fills them.
	Members []Member `json:"members,omitempty"`
	// Notes say what the report could not tell (an instance not read, a status older
	// than the spec).
	Notes   []string    `json:"notes,omitempty"`
	Created metav1.Time `json:"created"`
}

// Member is one instance: its pod as the API server has it, and what it said over SQL.
type Member struct {
	Name string `json:"name"`
	Role string `json:"role,omitempty"`
	// Fenced: the operator holds it fenced (status.fencedInstances).
	Fenced   bool   `json:"fenced,omitempty"`
	Ready    bool   `json:"ready"`
	Phase    string `json:"phase"`
	Node     string `json:"node,omitempty"`
	Restarts int32  `json:"restarts"`
	// SQL is nil when the instance could not be read; SQLError says why.
	SQL      *InstanceSQL `json:"sql,omitempty"`
	SQLError string       `json:"sqlError,omitempty"`
	// Behind counts the primary's transactions this replica has not executed; Errant the
	// ones it executed that the primary did not. Nil when either could not be read.
	Behind *int64 `json:"behind,omitempty"`
	Errant *int64 `json:"errant,omitempty"`
}

func newStatusCommand(o *options) *cobra.Command {
	var output string
	var all bool
	cmd := &cobra.Command{
		Use:   "status [CLUSTER]",
		Short: "Show a cluster's instances, replication and conditions, or one line per cluster",
		Long: "With a cluster's name: its instances (role, readiness, GTID set, lag, replication\n" +
			"threads, semi-sync, as each says over SQL through kubectl exec), its last backup and\n" +
			"its conditions. Without: one line per cluster of the namespace (-A: of every namespace).",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("want at most one cluster name, got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" && output != "yaml" {
				return usageErrorf("--output %q: want json or yaml (or nothing for a table)", output)
			}
			if len(args) == 1 && all {
				return usageErrorf("--all-namespaces lists clusters: give no cluster name with it")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), statusTimeout)
			defer cancel()
			if len(args) == 0 {
				reports, err := o.listReports(ctx, all)
				if err != nil {
					return err
				}
				return o.printList(reports, output, all)
			}
			r, err := o.report(ctx, args[0])
			if err != nil {
				return err
			}
			return o.printReport(r, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml instead of a table")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "list the clusters of every namespace")
	return cmd
}

// summary is a cluster's report without its members: what the list shows.
func summary(c *mysqlv1beta1.MySQLCluster) *Report {
	r := &Report{Namespace: c.Namespace, Name: c.Name, Phase: string(c.Status.Phase), Version: c.Status.Version,
		Instances: c.Status.Instances, ReadyInstances: c.Status.ReadyInstances, Primary: c.Status.CurrentPrimary,
		DesiredPrimary: c.Spec.Primary, Paused: c.Spec.Paused, Endpoints: c.Status.Endpoints, Backup: c.Status.Backup,
		Rollout: c.Status.Rollout, Conditions: c.Status.Conditions, Created: c.CreationTimestamp}
	if c.Spec.Instances != nil {
		r.Instances = *c.Spec.Instances
	}
	if ready := meta.FindStatusCondition(c.Status.Conditions, mysqlv1beta1.ConditionReady); ready != nil {
		r.Ready = string(ready.Status)
	}
	if c.Status.ObservedGeneration < c.Generation {
		r.Notes = append(r.Notes, fmt.Sprintf("the status describes generation %d of the spec, not %d yet: "+
			"the operator has not caught up (is it running?)", c.Status.ObservedGeneration, c.Generation))
	}
	return r
}

func (o *options) listReports(ctx context.Context, all bool) ([]*Report, error) {
	list := &mysqlv1beta1.MySQLClusterList{}
	var opts []client.ListOption
	ns := ""
	if !all {
		ns = o.namespace
		opts = append(opts, client.InNamespace(ns))
	}
	if err := o.client.List(ctx, list, opts...); err != nil {
		return nil, apiError("list", "mysqlclusters", ns, "", err)
	}
	reports := make([]*Report, 0, len(list.Items))
	for i := range list.Items {
		reports = append(reports, summary(&list.Items[i]))
	}
	slices.SortFunc(reports, func(a, b *Report) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return reports, nil
}

// getCluster reads a cluster of the command's namespace.
func (o *options) getCluster(ctx context.Context, name string) (*mysqlv1beta1.MySQLCluster, error) {
	c := &mysqlv1beta1.MySQLCluster{}
	err := o.client.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: name}, c)
	if apierrors.IsNotFound(err) {
		return nil, withCode(ExitNotFound, "MySQLCluster %q not found in namespace %s", name, o.namespace)
	}
	return c, apiError("get", "mysqlclusters", o.namespace, name, err)
}

// report reads one cluster, its pods and, side by side, each running instance over SQL.
func (o *options) report(ctx context.Context, name string) (*Report, error) {
	c, err := o.getCluster(ctx, name)
	if err != nil {
		return nil, err
	}
	pods := &corev1.PodList{}
	if err := o.client.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return nil, apiError("list", "pods", c.Namespace, "", err)
	}
	return o.reportOf(ctx, c, pods.Items), nil
}

// reportOf is the report of a cluster and its pods as read, with each running instance
// read over SQL, side by side.
func (o *options) reportOf(ctx context.Context, c *mysqlv1beta1.MySQLCluster, pods []corev1.Pod) *Report {
	r := summary(c)
	r.History = c.Status.History
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		byName[pods[i].Name] = &pods[i]
	}
	n := max(r.Instances, c.Status.Instances)
	r.Members = make([]Member, n)
	var wg sync.WaitGroup
	for i := range r.Members {
		m := &r.Members[i]
		m.Name = fmt.Sprintf("%s-%d", c.Name, i)
		m.Fenced = slices.Contains(c.Status.FencedInstances, m.Name)
		pod := byName[m.Name]
		if pod == nil {
			m.Phase, m.SQLError = "Missing", "no pod"
			continue
		}
		fillPod(m, pod)
		if pod.Status.Phase != corev1.PodRunning {
			m.SQLError = "pod not running"
			continue
		}
		wg.Go(func() {
			out, err := o.sql.Query(ctx, pod, instanceQuery)
			if err == nil {
				m.SQL, err = parseInstance(out)
			}
			if err != nil {
				m.SQLError = sqlError(err)
			}
		})
	}
	wg.Wait()
	compareGTIDs(r)
	return r
}

// sqlError words a failed read of an instance; a refused exec names the RBAC it needs. An
// exec the API server refuses fails its connection upgrade, and the executor returns the
// refusal as text ("unable to upgrade connection: pods "x" is forbidden: User ..."), not
// as a status error.
func sqlError(err error) string {
	if apierrors.IsForbidden(err) || strings.Contains(err.Error(), " is forbidden: User ") {
		return "not read: pods/exec refused (RBAC: grant \"create\" on \"pods/exec\"): " + err.Error()
	}
	return "not read: " + err.Error()
}

func fillPod(m *Member, pod *corev1.Pod) {
	m.Role = pod.Labels[resources.LabelRole]
	m.Phase = string(pod.Status.Phase)
	m.Node = pod.Spec.NodeName
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			m.Ready = cond.Status == corev1.ConditionTrue
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == resources.ContainerMySQL {
			m.Restarts = cs.RestartCount
		}
	}
	if pod.DeletionTimestamp != nil {
		m.Phase = "Terminating"
	}
}

// compareGTIDs counts each replica's missing and errant transactions against the primary.
func compareGTIDs(r *Report) {
	var primary gtid.Set
	found := false
	for _, m := range r.Members {
		if m.Name == r.Primary && m.SQL != nil {
			set, err := gtid.Parse(m.SQL.GTIDExecuted)
			if err != nil {
				r.Notes = append(r.Notes, fmt.Sprintf("%s: gtid_executed %q: %v", m.Name, m.SQL.GTIDExecuted, err))
				return
			}
			primary, found = set, true
		}
	}
	if !found {
		return
	}
	for i := range r.Members {
		m := &r.Members[i]
		if m.Name == r.Primary || m.SQL == nil {
			continue
		}
		set, err := gtid.Parse(m.SQL.GTIDExecuted)
		if err != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: gtid_executed %q: %v", m.Name, m.SQL.GTIDExecuted, err))
			continue
		}
		behind, errant := primary.Subtract(set).Count(), set.Subtract(primary).Count()
		m.Behind, m.Errant = &behind, &errant
	}
}

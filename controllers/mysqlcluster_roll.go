package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/internal/topology"
)

// The StatefulSet's update strategy is OnDelete: it replaces a pod with the new template
// only once the pod is deleted, and the roll step below decides which pod goes and when.
// Replicas go first, one at a time, each Ready and caught up before the next; then the
// primary hands over to an updated replica (one switchover) and goes last.
const (
	// RollStuckAfter is how long a restarted pod may take to become Ready before the roll
	// counts as paused (Degraded); the roll still waits for it.
	RollStuckAfter = 10 * time.Minute
	// RollStuckRestarts is how many times the mysqld container of a restarted pod may fail
	// before the roll counts as paused, whatever the time.
	RollStuckRestarts = 2
	// rollRecheck is how soon a roll in progress is looked at again: a pod becoming Ready
	// and a replica catching up are not all seen through watches.
	rollRecheck = 2 * time.Second
)

// rollPod is what the roll needs of one instance's pod.
type rollPod struct {
	name     string
	revision string
	ready    bool
	deleting bool
	handOver bool
	created  time.Time
	// restarts is how often its mysqld container restarted.
	restarts int32
	// legacy: it runs a template that cannot run under this operator (resources.Keepable).
	legacy bool
}

// rollInput is everything decideRoll looks at.
type rollInput struct {
	// pods are the pods of the instances spec.instances keeps, in ordinal order; total is
	// how many there should be.
	pods  []rollPod
	total int
	// revision is the StatefulSet's update revision; settled is false while its controller
	// has not seen the latest spec (the revision may then be stale).
	revision string
	settled  bool
	// managed, primary, healthy and caughtUp are the topology report's.
	managed  bool
	primary  string
	healthy  bool
	caughtUp []string
	now      time.Time
}

// rollPlan is what one pass of the roll does.
type rollPlan struct {
	updated, total int
	// restart is the pod to delete now, handOver the pod to annotate with
	// resources.AnnotationHandOver, release the pods whose annotation goes.
	restart, handOver string
	release           []string
	// step says what the roll does or waits for ("" when every pod runs the revision).
	step string
	// stuck is a restarted pod that did not come back (RollStuckAfter, RollStuckRestarts).
	stuck string
}

// decideRoll is the roll's policy, pure; every rule is a case in mysqlcluster_roll_test.go.
func decideRoll(in rollInput) rollPlan {
	p := rollPlan{total: in.total}
	outdated := func(pod rollPod) bool { return pod.revision != in.revision }
	for _, pod := range in.pods {
		if !outdated(pod) {
			p.updated++
		}
		if pod.handOver && !outdated(pod) {
			p.release = append(p.release, pod.name)
		}
	}
	switch {
	case p.updated == len(in.pods):
		return p // nothing outdated: a missing pod is created from the revision
	case !in.settled || in.revision == "":
		p.step = "waiting for the StatefulSet controller to see the new template"
		return p
	}
	for _, pod := range in.pods {
		if pod.deleting {
			p.step = "waiting for " + pod.name + " to restart"
			return p
		}
	}
	if len(in.pods) < in.total {
		p.step = "waiting for every instance's pod to exist"
		return p
	}
	if waiting := waitForPods(in, &p); waiting {
		return p
	}
	var replicas []rollPod
	for _, pod := range in.pods {
		if outdated(pod) && pod.name != in.primary {
			replicas = append(replicas, pod)
		}
	}
	if len(replicas) > 0 {
		p.restart = replicas[len(replicas)-1].name // the highest ordinal first, as a StatefulSet would
		p.step = fmt.Sprintf("restarting %s (%d of %d instances updated)", p.restart, p.updated, p.total)
		return p
	}
	// Only the primary is left.
	var primary rollPod
	for _, pod := range in.pods {
		if pod.name == in.primary {
			primary = pod
		}
	}
	switch {
	case !in.managed || in.total == 1 || primary.legacy:
		p.restart = primary.name
		p.step = fmt.Sprintf("restarting %s (%d of %d instances updated)", p.restart, p.updated, p.total)
	case !primary.handOver:
		p.handOver = primary.name
		p.step = "switching over from primary " + primary.name + " before restarting it"
	default:
		p.step = "waiting for the switchover away from primary " + primary.name
	}
	return p
}

// waitForPods sets the step when the roll must wait for a pod to be Ready or a replica to
// catch up, or restarts an outdated replica that is not Ready at once (it serves nothing,
// and the new template may be what fixes it). It reports whether the roll waits.
func waitForPods(in rollInput, p *rollPlan) bool {
	for _, pod := range slices.Backward(in.pods) {
		if !pod.ready && pod.revision != in.revision && pod.name != in.primary {
			p.restart = pod.name
			p.step = fmt.Sprintf("restarting %s, which is not Ready (%d of %d instances updated)", pod.name, p.updated, p.total)
			return true
		}
	}
	for _, pod := range in.pods {
		if pod.ready {
			continue
		}
		p.step = "waiting for " + pod.name + " to be Ready"
		if pod.revision == in.revision && (in.now.Sub(pod.created) > RollStuckAfter || pod.restarts >= RollStuckRestarts) {
			p.stuck = pod.name
			p.step = fmt.Sprintf("the roll is paused: %s has not become Ready since its restart %s ago (mysqld restarted %d times)",
				pod.name, in.now.Sub(pod.created).Round(time.Second), pod.restarts)
		}
		return true
	}
	if !in.managed || legacyLeft(in) {
		// Replication cannot be healthy before pods that lack the operator's accounts
		// restart (0.1.0's): the roll waits for each pod to be Ready, not for replication.
		return false
	}
	if !in.healthy || in.primary == "" {
		p.step = "waiting for replication to be healthy"
		return true
	}
	for _, pod := range in.pods {
		if pod.name != in.primary && !slices.Contains(in.caughtUp, pod.name) {
			p.step = "waiting for " + pod.name + " to catch up with primary " + in.primary
			return true
		}
	}
	return false
}

// legacyLeft reports whether an outdated pod runs a template that cannot run under this
// operator.
func legacyLeft(in rollInput) bool {
	return slices.ContainsFunc(in.pods, func(p rollPod) bool { return p.legacy && p.revision != in.revision })
}

// reconcileRoll restarts the pods that run an outdated template, in the order decideRoll
// gives, and records the plan for the status.
func (r *MySQLClusterReconciler) reconcileRoll(ctx context.Context, st *state) error {
	c, sts := st.cluster, st.statefulSet
	if sts == nil {
		return nil
	}
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return fmt.Errorf("while listing the instances' pods: %w", err)
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		byName[pods.Items[i].Name] = &pods.Items[i]
	}
	in := rollInputOf(c, sts, byName, st.topology, r.now())
	plan := decideRoll(in)
	st.roll = &plan
	for _, name := range plan.release {
		if err := r.annotateHandOver(ctx, byName[name], false); err != nil {
			return err
		}
	}
	switch {
	case plan.handOver != "":
		if err := r.annotateHandOver(ctx, byName[plan.handOver], true); err != nil {
			return err
		}
		logf.FromContext(ctx).Info("Primary asked to hand over before its restart", "pod", plan.handOver, "revision", in.revision)
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, mysqlv1beta1.ReasonRollingUpdate, "Roll",
			"Every replica runs the new template: switching over from primary %s before restarting it", plan.handOver)
	case plan.restart != "":
		pod := byName[plan.restart]
		// The UID precondition: a pod recreated since the list is not deleted by mistake.
		if err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("while restarting %s for the roll: %w", pod.Name, err)
		}
		logf.FromContext(ctx).Info("Restarting a pod onto the new template", "pod", pod.Name, "revision", in.revision,
			"updated", plan.updated, "total", plan.total)
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, mysqlv1beta1.ReasonRollingUpdate, "Roll",
			"Restarting %s onto the new template (%d of %d instances updated)", pod.Name, plan.updated, plan.total)
	}
	if plan.stuck != "" && r.warned.due(c.UID, mysqlv1beta1.ReasonRollPaused+"/"+plan.stuck, r.now()) {
		r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, mysqlv1beta1.ReasonRollPaused, "Roll", "%s", plan.step)
	}
	return nil
}

// rollInputOf gathers decideRoll's input from the StatefulSet, the pods and the topology report.
func rollInputOf(c *mysqlv1beta1.MySQLCluster, sts *appsv1.StatefulSet, byName map[string]*corev1.Pod, rep topology.Report, now time.Time) rollInput {
	in := rollInput{total: int(*c.Spec.Instances), revision: sts.Status.UpdateRevision,
		settled: sts.Status.ObservedGeneration >= sts.Generation, managed: rep.Managed,
		primary: rep.CurrentPrimary, healthy: rep.Healthy, caughtUp: rep.CaughtUp, now: now}
	for i := range in.total {
		pod := byName[c.InstanceName(i)]
		if pod == nil {
			continue
		}
		rp := rollPod{name: pod.Name, revision: pod.Labels[appsv1.StatefulSetRevisionLabel],
			deleting: pod.DeletionTimestamp != nil, created: pod.CreationTimestamp.Time,
			legacy: !resources.Keepable(&corev1.PodTemplateSpec{Spec: pod.Spec})}
		_, rp.handOver = pod.Annotations[resources.AnnotationHandOver]
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady {
				rp.ready = cond.Status == corev1.ConditionTrue
			}
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == resources.ContainerMySQL {
				rp.restarts = cs.RestartCount
			}
		}
		in.pods = append(in.pods, rp)
	}
	return in
}

// annotateHandOver sets or removes resources.AnnotationHandOver on an instance's pod.
func (r *MySQLClusterReconciler) annotateHandOver(ctx context.Context, pod *corev1.Pod, on bool) error {
	patch := client.MergeFrom(pod.DeepCopy())
	if on {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[resources.AnnotationHandOver] = "true"
	} else {
		delete(pod.Annotations, resources.AnnotationHandOver)
	}
	if err := r.Patch(ctx, pod, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("while marking %s for hand-over: %w", pod.Name, err)
	}
	return nil
}

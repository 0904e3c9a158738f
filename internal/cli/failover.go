package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// manualFailoverAction is the action of the operator's Events that answer a manual failover.
const manualFailoverAction = "ManualFailover"

func newFailoverCommand(o *options) *cobra.Command {
	var force bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "failover CLUSTER --force",
		Short: "Replace a primary that does not answer now, if no acknowledged write can be lost",
		Long: "failover asks the operator (annotation " + mysqlv1beta1.AnnotationFailover + ") to replace the\n" +
			"primary the cluster's Lease names at once: without waiting out the detection delay, and\n" +
			"also when spec.replication.failover.enabled is false. The operator refuses unless that\n" +
			"primary does not answer, is not fenced, and enough replicas answer to prove that the one\n" +
			"it promotes holds every acknowledged write (the quorum rule of automatic failover); it\n" +
			"answers with an Event, which this command prints. A primary that answers is moved with\n" +
			"kubectl dolphin switchover instead. --force is required: a failover evicts the old\n" +
			"primary's pod.",
		Args: exactArgs("CLUSTER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !force {
				return usageErrorf("failover evicts the primary's pod and promotes a replica: pass --force to ask for it " +
					"(kubectl dolphin switchover moves a primary that answers)")
			}
			if timeout <= 0 {
				return usageErrorf("--timeout %s: want a positive duration", timeout)
			}
			return o.failover(cmd.Context(), args[0], timeout)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "confirm the failover")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the operator to answer")
	return cmd
}

func (o *options) failover(ctx context.Context, name string, timeout time.Duration) error {
	start := o.now()
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	c, err := o.getCluster(rctx, name)
	if err != nil {
		return err
	}
	if err := notPaused(c, "fail over"); err != nil {
		return err
	}
	lease := &coordinationv1.Lease{}
	err = o.client.Get(rctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PrimaryLeaseName(c)}, lease)
	switch {
	case apierrors.IsNotFound(err):
		return withCode(ExitRefused, "%s has no primary yet (no Lease %s): nothing to fail over from", name, resources.PrimaryLeaseName(c))
	case err != nil:
		return apiError("get", "leases", c.Namespace, resources.PrimaryLeaseName(c), err)
	}
	primary := ""
	if lease.Spec.HolderIdentity != nil {
		primary = *lease.Spec.HolderIdentity
	}
	if primary == "" {
		return withCode(ExitRefused, "%s has no primary yet (Lease %s holds none): nothing to fail over from", name, lease.Name)
	}
	if err := o.setAnnotation(rctx, c, mysqlv1beta1.AnnotationFailover, primary); err != nil {
		return err
	}
	fmt.Fprintf(o.io.Out, "Failover of %s/%s from primary %s asked for (annotation %s).\n", c.Namespace, name, primary,
		mysqlv1beta1.AnnotationFailover)
	w := &waiter{o: o, name: name, start: start, generation: c.Generation}
	silent := false
	err = w.until(ctx, timeout, func(c *mysqlv1beta1.MySQLCluster) bool {
		if _, asked := c.Annotations[mysqlv1beta1.AnnotationFailover]; !asked {
			return true
		}
		// Every pass answers a request or takes it up (ReplicationHealthy: Failover) at once.
		cond := meta.FindStatusCondition(c.Status.Conditions, mysqlv1beta1.ConditionReplicationHealthy)
		silent = (cond == nil || cond.Reason != mysqlv1beta1.ReasonFailover) && o.now().Sub(start) > operatorGrace
		return silent
	})
	withdraw := fmt.Sprintf("kubectl annotate mysqlcluster %s %s- withdraws it", name, mysqlv1beta1.AnnotationFailover)
	if silent {
		return withCode(ExitTimeout, "failover from %s: the operator has not answered in %s (is it running?); the request stays: %s",
			primary, operatorGrace, withdraw)
	}
	if err != nil {
		return fmt.Errorf("failover from %s: %w: %s", primary, err, withdraw)
	}
	return o.failoverAnswer(ctx, c, primary, start)
}

// eventWait bounds the wait for the operator's Event after the request is withdrawn: the
// operator records it just after, and Events are written asynchronously.
var eventWait = 15 * time.Second

// failoverAnswer prints the operator's answer to a withdrawn request, its Event.
func (o *options) failoverAnswer(ctx context.Context, c *mysqlv1beta1.MySQLCluster, primary string, start time.Time) error {
	e, err := o.waitForEvent(ctx, c, start, eventWait, func(e *corev1.Event) bool {
		return e.Action == manualFailoverAction && strings.HasPrefix(e.Message, "Manual failover from "+primary)
	})
	switch {
	case err != nil:
		return err
	case e == nil:
		return withCode(ExitFailed, "the operator withdrew the request, and no Event of its answer came within %s: "+
			"kubectl dolphin status %s shows who is primary", eventWait, c.Name)
	case e.Reason == mysqlv1beta1.ReasonFailoverRefused:
		return withCode(ExitRefused, "the operator refused: %s", e.Message)
	}
	fmt.Fprintf(o.io.Out, "The operator reports: %s\n", e.Message)
	fmt.Fprintf(o.io.Out, "Failover done after %s; kubectl dolphin status %s shows the old primary rejoining.\n",
		o.now().Sub(start).Round(100*time.Millisecond), c.Name)
	return nil
}

// newestEvent is the newest Event about cluster c since start that match accepts (nil when
// there is none).
func (o *options) newestEvent(ctx context.Context, c *mysqlv1beta1.MySQLCluster, start time.Time,
	match func(*corev1.Event) bool) (*corev1.Event, error) {
	list := &corev1.EventList{}
	if err := o.client.List(ctx, list, client.InNamespace(c.Namespace),
		client.MatchingFields{"involvedObject.name": c.Name}); err != nil {
		return nil, apiError("list", "events", c.Namespace, "", err)
	}
	// Clocks differ a little between this machine and the operator's.
	since := start.Add(-5 * time.Second)
	var newest *corev1.Event
	for i := range list.Items {
		e := &list.Items[i]
		if e.InvolvedObject.Kind != "MySQLCluster" || e.InvolvedObject.UID != c.UID || !match(e) {
			continue
		}
		if t := eventTime(e); t.After(since) && (newest == nil || t.After(eventTime(newest))) {
			newest = e
		}
	}
	return newest, nil
}

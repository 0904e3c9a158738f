package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

func newFenceCommand(o *options, fence bool) *cobra.Command {
	var force, wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "fence CLUSTER INSTANCE",
		Short: "Take an instance out of service, read-only and replicating from nobody, for inspection",
		Long: "fence adds the instance to the cluster's annotation " + mysqlv1beta1.AnnotationFencedInstances + "\n" +
			"and waits until the operator reports it fenced (status.fencedInstances): read-only\n" +
			"(super_read_only), its replication stopped, its client sessions ended, out of both\n" +
			"Services, never promoted. Its mysqld keeps running: kubectl dolphin mysql CLUSTER\n" +
			"--instance INSTANCE reaches it. The cluster is Degraded (reason InstanceFenced) until\n" +
			"kubectl dolphin unfence.\n\n" +
			"Fencing the primary stops every write to the cluster, and fencing replicas so that fewer\n" +
			"remain than spec.replication.semiSync.waitForReplicaCount holds every commit; both\n" +
			"need --force.",
		Args: exactArgs("CLUSTER", "INSTANCE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return usageErrorf("--timeout %s: want a positive duration", timeout)
			}
			return o.setFenced(cmd.Context(), args[0], args[1], fenceOptions{fence: fence, force: force, wait: wait, timeout: timeout})
		},
	}
	if fence {
		cmd.Flags().BoolVar(&force, "force", false, "fence although writes stop (the primary, or too few replicas left to acknowledge commits)")
	} else {
		cmd.Use = "unfence CLUSTER INSTANCE"
		cmd.Short = "Return a fenced instance to service"
		cmd.Long = "unfence removes the instance from the cluster's annotation " + mysqlv1beta1.AnnotationFencedInstances + "\n" +
			"and waits until the operator no longer reports it fenced and the cluster is Ready: a\n" +
			"replica replicates again, a primary is made writable again."
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for the operator")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the operator has carried it out")
	return cmd
}

type fenceOptions struct {
	fence, force, wait bool
	timeout            time.Duration
}

func (o *options) setFenced(ctx context.Context, name, instance string, opt fenceOptions) error {
	start := o.now()
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	c, err := o.getCluster(rctx, name)
	if err != nil {
		return err
	}
	if err := isInstance(c, instance); err != nil {
		return err
	}
	if err := notPaused(c, "fence or unfence"); err != nil {
		return err
	}
	list := c.FencedInstances()
	listed := slices.Contains(list, instance)
	if opt.fence && !listed {
		if err := writesStop(c, instance, list); err != nil && !opt.force {
			return err
		}
		list = append(list, instance)
	}
	if !opt.fence {
		list = slices.DeleteFunc(list, func(n string) bool { return n == instance })
	}
	if opt.fence != listed {
		if err := o.setAnnotation(rctx, c, mysqlv1beta1.AnnotationFencedInstances, strings.Join(list, ",")); err != nil {
			return err
		}
	}
	verb := map[bool]string{true: "Fence", false: "Unfence"}[opt.fence]
	fmt.Fprintf(o.io.Out, "%s of %s in %s/%s asked for (annotation %s).\n", verb, instance, c.Namespace, name,
		mysqlv1beta1.AnnotationFencedInstances)
	if !opt.wait {
		return nil
	}
	w := &waiter{o: o, name: name, start: start, generation: c.Generation}
	done := func(c *mysqlv1beta1.MySQLCluster) bool {
		if opt.fence {
			return slices.Contains(c.Status.FencedInstances, instance)
		}
		return !slices.Contains(c.Status.FencedInstances, instance) &&
			meta.IsStatusConditionTrue(c.Status.Conditions, mysqlv1beta1.ConditionReady)
	}
	if err := w.until(ctx, opt.timeout, done); err != nil {
		return fmt.Errorf("%s %s: %w (is the operator running? kubectl dolphin report %s gathers its logs)",
			strings.ToLower(verb), instance, err, name)
	}
	if opt.fence {
		fmt.Fprintf(o.io.Out, "%s is fenced: read-only, replication stopped, out of both Services (after %s).\n"+
			"kubectl dolphin mysql %s --instance %s reaches it; kubectl dolphin unfence %s %s returns it.\n",
			instance, o.now().Sub(start).Round(100*time.Millisecond), name, instance, name, instance)
	} else {
		fmt.Fprintf(o.io.Out, "%s is back in service and %s/%s is Ready (after %s).\n", instance, c.Namespace, name,
			o.now().Sub(start).Round(100*time.Millisecond))
	}
	return nil
}

// writesStop says why fencing instance (besides those fenced already) would stop writes,
// nil when it would not: it is the primary, or too few replicas would be left to
// acknowledge each commit (lossless semi-sync then holds every commit until its timeout).
func writesStop(c *mysqlv1beta1.MySQLCluster, instance string, fenced []string) error {
	if instance == c.Status.CurrentPrimary {
		return withCode(ExitRefused, "%s is the primary of %s: fenced, it refuses every write until it is unfenced "+
			"(kubectl dolphin switchover %s --to ANOTHER first, or --force)", instance, c.Name, c.Name)
	}
	ss := c.Spec.Replication.SemiSync
	if (ss.Enabled != nil && !*ss.Enabled) || c.Spec.Instances == nil {
		return nil
	}
	need := int32(1)
	if ss.WaitForReplicaCount != nil {
		need = *ss.WaitForReplicaCount
	}
	left := *c.Spec.Instances - 1
	for _, n := range append(slices.Clone(fenced), instance) {
		if n != c.Status.CurrentPrimary {
			left--
		}
	}
	if left < need {
		return withCode(ExitRefused, "with %s fenced, %d replica(s) of %s would acknowledge commits and "+
			"spec.replication.semiSync.waitForReplicaCount is %d: every commit would wait until "+
			"spec.replication.semiSync.timeout (use --force to fence anyway)", instance, max(left, 0), c.Name, need)
	}
	return nil
}

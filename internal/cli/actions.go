package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// operatorGrace is how long a command waits for the operator to take up a changed spec
// (status.observedGeneration) before it says the operator may not be running.
const operatorGrace = 30 * time.Second

func newSwitchoverCommand(o *options) *cobra.Command {
	var to string
	var timeout time.Duration
	var wait bool
	cmd := &cobra.Command{
		Use:   "switchover CLUSTER --to INSTANCE",
		Short: "Make another instance the primary (a planned switchover), and wait until it is",
		Long: "switchover sets spec.primary to the instance and waits until the operator reports it\n" +
			"primary and the cluster Ready, printing each step it reports; then how long writes\n" +
			"were refused, as the operator measured it. On a timeout spec.primary stays set: the\n" +
			"operator goes on (set it back to cancel).",
		Args: exactArgs("CLUSTER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return usageErrorf("--to: name the instance to make primary (e.g. %s-1)", args[0])
			}
			if timeout <= 0 {
				return usageErrorf("--timeout %s: want a positive duration", timeout)
			}
			return o.switchover(cmd.Context(), args[0], to, timeout, wait)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the instance to make primary (its pod's name)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the switchover")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the operator has switched over")
	return cmd
}

// isInstance checks that instance is one of the cluster's: <cluster>-<ordinal> below
// spec.instances (as the webhook checks spec.primary).
func isInstance(c *mysqlv1beta1.MySQLCluster, instance string) error {
	n := int32(0)
	if c.Spec.Instances != nil {
		n = *c.Spec.Instances
	}
	if i, ok := c.InstanceOrdinal(instance); !ok || i >= int(n) {
		return withCode(ExitNotFound, "%q is not an instance of %s (it has %s-0 to %s-%d)", instance, c.Name, c.Name, c.Name, n-1)
	}
	return nil
}

// notPaused refuses a request the operator would not carry out (doing) on a paused cluster.
func notPaused(c *mysqlv1beta1.MySQLCluster, doing string) error {
	if c.Spec.Paused {
		return withCode(ExitRefused, "%s is paused: the operator would not %s (kubectl dolphin resume %s first)", c.Name, doing, c.Name)
	}
	return nil
}

// setAnnotation sets (or, with value "", removes) one annotation of the cluster, under its
// resourceVersion: a cluster changed since c was read is not overwritten.
func (o *options) setAnnotation(ctx context.Context, c *mysqlv1beta1.MySQLCluster, key, value string) error {
	patch := client.MergeFromWithOptions(c.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[key] = value
	if value == "" {
		delete(c.Annotations, key)
	}
	if err := o.client.Patch(ctx, c, patch); err != nil {
		return apiError("patch", "mysqlclusters", c.Namespace, c.Name, err)
	}
	return nil
}

// waitForEvent polls, every o.poll for at most within, for the newest Event about c since
// start that match accepts; nil when none came in time.
func (o *options) waitForEvent(ctx context.Context, c *mysqlv1beta1.MySQLCluster, start time.Time, within time.Duration,
	match func(*corev1.Event) bool) (*corev1.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, requestTimeout)
		e, err := o.newestEvent(rctx, c, start, match)
		rcancel()
		switch {
		case err != nil && ctx.Err() == nil:
			return nil, err
		case e != nil:
			return e, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(o.poll):
		}
	}
}

func (o *options) switchover(ctx context.Context, name, to string, timeout time.Duration, wait bool) error {
	start := o.now()
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	c, err := o.getCluster(rctx, name)
	if err != nil {
		return err
	}
	if err := isInstance(c, to); err != nil {
		return err
	}
	if err := notPaused(c, "switch over"); err != nil {
		return err
	}
	if c.Status.CurrentPrimary == to && c.Spec.Primary == to {
		fmt.Fprintf(o.io.Out, "%s is already the primary of %s/%s.\n", to, c.Namespace, name)
		return nil
	}
	if c.Spec.Primary != to {
		patch := client.MergeFromWithOptions(c.DeepCopy(), client.MergeFromWithOptimisticLock{})
		c.Spec.Primary = to
		if err := o.client.Patch(rctx, c, patch); err != nil {
			return apiError("patch", "mysqlclusters", c.Namespace, name, err)
		}
	}
	fmt.Fprintf(o.io.Out, "Switchover of %s/%s to %s asked for (spec.primary).\n", c.Namespace, name, to)
	if !wait {
		return nil
	}
	w := &waiter{o: o, name: name, start: start, generation: c.Generation}
	done := func(c *mysqlv1beta1.MySQLCluster) bool {
		return c.Status.CurrentPrimary == to && meta.IsStatusConditionTrue(c.Status.Conditions, mysqlv1beta1.ConditionReady)
	}
	if err := w.until(ctx, timeout, done); err != nil {
		return fmt.Errorf("switchover to %s: %w", to, err)
	}
	fmt.Fprintf(o.io.Out, "%s is the primary of %s/%s and the cluster is Ready, after %s.\n", to, c.Namespace, name,
		o.now().Sub(start).Round(100*time.Millisecond))
	ectx, ecancel := context.WithTimeout(ctx, requestTimeout)
	defer ecancel()
	note, err := o.switchoverEvent(ectx, c, to, start)
	switch {
	case err != nil:
		fmt.Fprintf(o.io.ErrOut, "Warning: could not read the operator's Events: %v\n", err)
	case note == "":
		fmt.Fprintln(o.io.Out, "The operator reported no Switchover Event: how long writes were refused is not known.")
	default:
		fmt.Fprintln(o.io.Out, "The operator reports: "+note)
	}
	return nil
}

// switchoverEvent is the note of the operator's Switchover Event that made to primary
// after start (it says how long writes were refused); empty when there is none.
func (o *options) switchoverEvent(ctx context.Context, c *mysqlv1beta1.MySQLCluster, to string, start time.Time) (string, error) {
	e, err := o.newestEvent(ctx, c, start, func(e *corev1.Event) bool {
		return e.Reason == mysqlv1beta1.ReasonSwitchover && strings.HasPrefix(e.Message, to+" is the primary")
	})
	if e == nil || err != nil {
		return "", err
	}
	return e.Message, nil
}

// eventTime is when the Event was last seen: an Event that recurs (the same note again)
// is one object with a series, whose first time is its eventTime.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.LastTimestamp.Time
}

// waiter reads a cluster until a test holds, printing each change of its conditions.
type waiter struct {
	o          *options
	name       string
	start      time.Time
	generation int64
	seen       map[string]string // condition type → the status, reason and message printed
}

// until polls the cluster every o.poll until done holds, the timeout passes (ExitTimeout)
// or the operator has not taken up the spec's generation after operatorGrace.
func (w *waiter) until(ctx context.Context, timeout time.Duration, done func(*mysqlv1beta1.MySQLCluster) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *mysqlv1beta1.MySQLCluster
	for {
		rctx, rcancel := context.WithTimeout(ctx, requestTimeout)
		c, err := w.o.getCluster(rctx, w.name)
		rcancel()
		if err != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return err
		}
		if err == nil {
			last = c
			w.report(c)
			if c.Status.ObservedGeneration >= w.generation && done(c) {
				return nil
			}
			if c.Status.ObservedGeneration < w.generation && w.o.now().Sub(w.start) > operatorGrace {
				return withCode(ExitTimeout, "the operator has not taken up the change in %s (status.observedGeneration %d < %d): is it running?",
					operatorGrace, c.Status.ObservedGeneration, w.generation)
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return withCode(ExitTimeout, "not done after %s%s; the change stays asked for", timeout, lastWords(last))
			}
			return ctx.Err()
		case <-time.After(w.o.poll):
		}
	}
}

// lastWords is what the cluster said last, for a timeout's message.
func lastWords(c *mysqlv1beta1.MySQLCluster) string {
	if c == nil {
		return ""
	}
	for _, t := range []string{mysqlv1beta1.ConditionDegraded, mysqlv1beta1.ConditionProgressing, mysqlv1beta1.ConditionReady} {
		if cond := meta.FindStatusCondition(c.Status.Conditions, t); cond != nil && cond.Message != "" &&
			(cond.Status == metav1.ConditionTrue) == (t != mysqlv1beta1.ConditionReady) {
			return fmt.Sprintf(" (%s %s: %s)", t, cond.Reason, cond.Message)
		}
	}
	return ""
}

// report prints the conditions that changed since the last read (the first read only sets
// the baseline), with the time since start.
func (w *waiter) report(c *mysqlv1beta1.MySQLCluster) {
	primed := w.seen != nil
	if !primed {
		w.seen = map[string]string{}
	}
	for _, cond := range c.Status.Conditions {
		say := string(cond.Status) + " " + cond.Reason + ": " + cond.Message
		if w.seen[cond.Type] == say {
			continue
		}
		w.seen[cond.Type] = say
		if primed {
			fmt.Fprintf(w.o.io.Out, "  %6.1fs  %s %s\n", w.o.now().Sub(w.start).Seconds(), cond.Type, say)
		}
	}
}

func newPauseCommand(o *options, pause bool) *cobra.Command {
	verb, short := "pause", "Stop the operator from changing a cluster (status is still reported)"
	if !pause {
		verb, short = "resume", "Let the operator manage a paused cluster again"
	}
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   verb + " CLUSTER",
		Short: short,
		Args:  exactArgs("CLUSTER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return usageErrorf("--timeout %s: want a positive duration", timeout)
			}
			return o.setPaused(cmd.Context(), args[0], pause, timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", operatorGrace, "how long to wait for the operator to take it up")
	return cmd
}

func (o *options) setPaused(ctx context.Context, name string, pause bool, timeout time.Duration) error {
	start := o.now()
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	c, err := o.getCluster(rctx, name)
	if err != nil {
		return err
	}
	state := map[bool]string{true: "paused", false: "resumed"}[pause]
	if c.Spec.Paused != pause {
		patch := client.MergeFrom(c.DeepCopy())
		c.Spec.Paused = pause
		if err := o.client.Patch(rctx, c, patch); err != nil {
			return apiError("patch", "mysqlclusters", c.Namespace, name, err)
		}
	}
	w := &waiter{o: o, name: name, start: start, generation: c.Generation}
	taken := func(c *mysqlv1beta1.MySQLCluster) bool {
		return !pause || c.Status.Phase == mysqlv1beta1.PhasePaused
	}
	if err := w.until(ctx, timeout, taken); err != nil {
		return fmt.Errorf("%s %s: %w", state, name, err)
	}
	if pause {
		fmt.Fprintf(o.io.Out, "%s/%s paused: the operator changes nothing of it until kubectl dolphin resume %s.\n", c.Namespace, name, name)
	} else {
		fmt.Fprintf(o.io.Out, "%s/%s resumed: the operator manages it again.\n", c.Namespace, name)
	}
	return nil
}

package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// operatorRotationTimeout is rotate-password --operator-accounts' default wait: the
// rotation restarts every instance, one at a time.
const operatorRotationTimeout = 15 * time.Minute

func newRotatePasswordCommand(o *options) *cobra.Command {
	var timeout time.Duration
	var operator bool
	cmd := &cobra.Command{
		Use:   "rotate-password CLUSTER",
		Short: "Give the application account (or the operator's accounts) new passwords; the old ones keep working for a while",
		Long: "rotate-password sets the cluster's annotation " + mysqlv1beta1.AnnotationRotateApplicationPassword + "\n" +
			"to the current time and waits until the operator reports the new password set on the\n" +
			"primary (its ApplicationAccount Event). The Secret <cluster>-app then holds the new\n" +
			"password, and the old one (previous-password) logs in too until\n" +
			"spec.application.previousPasswordRetention has passed. The password itself is not printed.\n\n" +
			"With --operator-accounts it sets " + mysqlv1beta1.AnnotationRotateOperatorPasswords + " instead\n" +
			"and waits (15 minutes unless --timeout says otherwise) until the operator reports the\n" +
			"rotation of its accounts' passwords done: the instances restarted onto the new passwords\n" +
			"(primary last) and the old ones discarded.",
		Args: exactArgs("CLUSTER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return usageErrorf("--timeout %s: want a positive duration", timeout)
			}
			if operator {
				if !cmd.Flags().Changed("timeout") {
					timeout = operatorRotationTimeout
				}
				return o.rotateOperatorPasswords(cmd.Context(), args[0], timeout)
			}
			return o.rotatePassword(cmd.Context(), args[0], timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for the operator")
	cmd.Flags().BoolVar(&operator, "operator-accounts", false, "rotate the operator's own accounts' passwords instead")
	return cmd
}

// rotation is one kind of password rotation the command asks for.
type rotation struct {
	annotation string
	// what the rotation changes, for the messages.
	what string
	// refuse says why the cluster has nothing to rotate ("" when it has).
	refuse func(*mysqlv1beta1.MySQLCluster) string
	// done matches the operator's Event that answers the request token.
	done func(e *corev1.Event, token string) bool
	// timedOut is the message when no such Event came within the timeout.
	timedOut string
}

// askRotation sets r's annotation to the current time and waits for the operator's
// answer, which it prints: the cluster as read, and when it was asked.
func (o *options) askRotation(ctx context.Context, name string, timeout time.Duration, r rotation) (
	*mysqlv1beta1.MySQLCluster, time.Time, error) {
	start := o.now()
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	c, err := o.getCluster(rctx, name)
	if err != nil {
		return nil, start, err
	}
	if why := r.refuse(c); why != "" {
		return nil, start, withCode(ExitRefused, "%s", why)
	}
	if err := notPaused(c, "rotate"); err != nil {
		return nil, start, err
	}
	token := start.UTC().Format(time.RFC3339Nano)
	if err := o.setAnnotation(rctx, c, r.annotation, token); err != nil {
		return nil, start, err
	}
	fmt.Fprintf(o.io.Out, "Rotation of %s's %s asked for (annotation %s=%s).\n", name, r.what, r.annotation, token)
	e, err := o.waitForEvent(ctx, c, start, timeout, func(e *corev1.Event) bool { return r.done(e, token) })
	switch {
	case err != nil:
		return nil, start, err
	case e == nil:
		return nil, start, withCode(ExitTimeout, r.timedOut, timeout)
	}
	fmt.Fprintf(o.io.Out, "The operator reports: %s\n", e.Message)
	return c, start, nil
}

// rotateOperatorPasswords asks for a rotation of the operator's passwords and waits for
// the Event that says it is done.
func (o *options) rotateOperatorPasswords(ctx context.Context, name string, timeout time.Duration) error {
	_, _, err := o.askRotation(ctx, name, timeout, rotation{annotation: mysqlv1beta1.AnnotationRotateOperatorPasswords,
		what: "operator passwords", refuse: func(*mysqlv1beta1.MySQLCluster) string { return "" },
		done: func(e *corev1.Event, token string) bool {
			return e.Reason == mysqlv1beta1.ReasonPasswordRotation && strings.HasPrefix(e.Message, "Rotation "+token+" ") &&
				strings.Contains(e.Message, " is done")
		},
		timedOut: "the operator has not reported the rotation done after %s; it goes on (its PasswordRotation Events say how far)"})
	return err
}

func (o *options) rotatePassword(ctx context.Context, name string, timeout time.Duration) error {
	c, start, err := o.askRotation(ctx, name, timeout, rotation{annotation: mysqlv1beta1.AnnotationRotateApplicationPassword,
		what: "application password",
		refuse: func(c *mysqlv1beta1.MySQLCluster) string {
			if c.Spec.Application == nil {
				return c.Name + " has no spec.application: there is no application account to rotate"
			}
			return ""
		},
		done: func(e *corev1.Event, _ string) bool { return e.Reason == mysqlv1beta1.ReasonApplicationAccount },
		timedOut: "the operator has not reported the new password set after %s (is it running?); " +
			"the rotation stays asked for"})
	if err != nil {
		return err
	}
	retention := mysqlv1beta1.DefaultPreviousPasswordRetention
	if r := c.Spec.Application.PreviousPasswordRetention; r != nil {
		retention = r.Duration
	}
	fmt.Fprintf(o.io.Out, "The new password is in Secret %s (key %s); the previous one (key %s) logs in until about %s.\n",
		resources.ApplicationSecretName(c), resources.KeyAppPassword, resources.KeyAppPreviousPassword,
		start.Add(retention).UTC().Format(time.RFC3339))
	return nil
}

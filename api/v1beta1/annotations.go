package v1beta1

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Annotations of a MySQLCluster by which a user asks the operator for an operation that is
// not a desired state (kubectl dolphin sets them).
const (
	// AnnotationFencedInstances lists (comma-separated) the instances to fence: each is made
	// read-only (super_read_only) with its replication stopped and its client sessions
	// ended once, is taken out of both Services, and is left alone otherwise (no clone, no
	// reconfiguration, never promoted) until it is removed from the list. A fenced primary
	// refuses writes and is not failed over from. Its mysqld keeps running, for inspection.
	AnnotationFencedInstances = "mysql.dolphin-operator.io/fenced-instances"
	// AnnotationFailover names the primary a manual failover is to replace: the operator
	// fails over from it at once (without waiting out the detection delay, and whether or
	// not spec.replication.failover.enabled) if it does not answer and the quorum rule
	// proves no acknowledged write is lost; otherwise it refuses. Either way it removes the
	// annotation and says what it did in an Event (Failover or FailoverRefused).
	AnnotationFailover = "mysql.dolphin-operator.io/failover"
	// AnnotationRotateApplicationPassword asks for a new password of spec.application's
	// account whenever its value changes (any value: a date, a counter): the Secret gets a
	// new password and keeps the one it replaces as previous-password, which the account
	// accepts beside the new one for spec.application.previousPasswordRetention.
	AnnotationRotateApplicationPassword = "mysql.dolphin-operator.io/rotate-application-password"
	// AnnotationRotateOperatorPasswords asks for new passwords of the operator's network
	// accounts (dolphin-admin, dolphin-repl, dolphin-exporter, dolphin-backup, dolphin-users)
	// whenever its value changes (any value): each account takes its new password and
	// accepts the old one beside it until every pod and Job of the cluster uses the new one
	// (the instances restart, one at a time, primary last), then the old ones are
	// discarded. A new value asked while a rotation runs starts once it has ended. Root and
	// dolphin-probe (local socket only) keep theirs.
	AnnotationRotateOperatorPasswords = "mysql.dolphin-operator.io/rotate-operator-passwords"
)

// FencedInstances is the list AnnotationFencedInstances holds, in its order, without
// blanks or repeats.
func (c *MySQLCluster) FencedInstances() []string {
	var out []string
	for f := range strings.SplitSeq(c.Annotations[AnnotationFencedInstances], ",") {
		if f = strings.TrimSpace(f); f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// ValidateAnnotations checks that the operation annotations name instances of the cluster.
// Only the webhook runs it: a cluster stored with a bad one is still reconciled (the
// topology manager ignores names that are not instances).
func (c *MySQLCluster) ValidateAnnotations() field.ErrorList {
	p := field.NewPath("metadata", "annotations")
	var errs field.ErrorList
	for _, name := range c.FencedInstances() {
		if why := c.notAnInstance(name); why != "" {
			errs = append(errs, field.Invalid(p.Key(AnnotationFencedInstances), c.Annotations[AnnotationFencedInstances],
				fmt.Sprintf("%q %s", name, why)))
		}
	}
	if v, ok := c.Annotations[AnnotationFailover]; ok {
		if why := c.notAnInstance(v); why != "" {
			errs = append(errs, field.Invalid(p.Key(AnnotationFailover), v, "must name the primary to replace: "+why))
		}
	}
	return errs
}

// notAnInstance says why name is not one of the cluster's instances ("" when it is).
func (c *MySQLCluster) notAnInstance(name string) string {
	n := 0
	if c.Spec.Instances != nil {
		n = int(*c.Spec.Instances)
	}
	if i, ok := c.InstanceOrdinal(name); !ok || i >= n {
		return fmt.Sprintf("is not an instance of this cluster (%s-0 to %s-%d)", c.Name, c.Name, n-1)
	}
	return ""
}

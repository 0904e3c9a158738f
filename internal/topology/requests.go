package topology

import (
	"fmt"
	"slices"
	"time"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// What the user asks for by annotation, beyond the spec: fenced instances and a manual
// failover. Both are part of the pure decision; decide_test.go names each rule.

// isolateFenced is the action that fences instance i as the user asked, if it still needs
// one: a fenced instance is read-only, replicates from nobody and had its client sessions
// ended. ok is false when it is fenced already or does not answer (it then is the moment
// it does, before anything else: skip_replica_start keeps a restarted one from
// replicating meanwhile).
func isolateFenced(i Instance) (Action, bool) {
	if !i.Reachable || (!i.Writable && !i.IORunning && !i.SQLRunning && !i.IOConnecting) {
		return Action{}, false
	}
	return Action{Kind: ActIsolate, Target: i.Name}, true
}

// fencedNote is what the status says of a fenced instance.
func fencedNote(i Instance) string {
	if !i.Reachable {
		return fmt.Sprintf("%s is fenced (and does not answer: %s)", i.Name, orUnknown(i.Error))
	}
	return i.Name + " is fenced: read-only, replication stopped, out of service"
}

// errorOf is why an instance does not answer ("" for none, or no instance at all).
func errorOf(i *Instance) string {
	if i == nil {
		return "it has no pod"
	}
	return i.Error
}

// fencedPrimary handles a primary that answers and that the user fenced: it is made
// read-only (its client sessions ended) and leaves the primary Service; nobody is promoted
// or reconfigured while it stays fenced, and the replicas that replicate from it go on
// serving reads.
func fencedPrimary(in Input, p *Instance) Decision {
	d := Decision{Primary: p.Name, Roles: noRoles(in), State: StateFenced,
		Reason: mysqlv1beta1.ReasonInstanceFenced}
	for _, i := range in.Instances {
		switch {
		case in.Fenced[i.Name]:
			if a, ok := isolateFenced(i); ok && i.Name != p.Name {
				d.Actions = append(d.Actions, a)
			}
		case i.Reachable && i.Writable:
			d.Actions = append(d.Actions, Action{Kind: ActFence, Target: i.Name})
		}
	}
	if p.Writable {
		// Its replication is not stopped: it has none, and an isolated primary's replicas
		// would lose their source for nothing.
		d.Actions = append(d.Actions, Action{Kind: ActFence, Target: p.Name})
	}
	markReplicas(in, &d, p.Name)
	d.Message = fmt.Sprintf("primary %s is fenced: it refuses writes, and no instance is promoted while it is "+
		"(remove it from the annotation %s to resume)", p.Name, mysqlv1beta1.AnnotationFencedInstances)
	if len(d.Actions) > 0 {
		d.RequeueAfter = time.Second
	}
	return d
}

// judgeRequest says what becomes of a manual failover request, given the decision made
// with it. A request is refused unless its primary is the recorded one, does not answer,
// is not fenced, and the quorum rule lets a failover run; it is done once the failover's
// promotion is decided.
func judgeRequest(in Input, down bool, d Decision) (RequestOutcome, string) {
	r := in.FailoverRequest
	switch {
	case r == "":
		return "", ""
	case in.Primary == "":
		return RequestRefused, "no primary has been elected yet"
	case r != in.Primary && in.FailedPrimary == r:
		return RequestDone, fmt.Sprintf("the failover from %s is done: %s is the primary", r, in.Primary)
	case r != in.Primary:
		return RequestRefused, fmt.Sprintf("%s is not the primary (%s is)", r, in.Primary)
	case in.Fenced[r]:
		return RequestRefused, fmt.Sprintf("primary %s is fenced: unfence it before failing over from it", r)
	case !down:
		return RequestRefused, fmt.Sprintf("primary %s answers: a failover replaces a primary that does not "+
			"(a switchover, spec.primary, moves a healthy one without losing a write)", r)
	}
	promoted := slices.ContainsFunc(d.Actions, func(a Action) bool { return a.Kind == ActPromote && a.Failover })
	switch {
	case promoted:
		return RequestDone, fmt.Sprintf("failover from %s: %s", r, d.Message)
	case d.State == StateFailover:
		return RequestCarriedOn, d.Message
	}
	return RequestRefused, d.Message
}

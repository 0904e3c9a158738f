package topology

import (
	"fmt"
	"sort"
	"strings"
	"time"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// Decide is the whole policy: from what gather read, the state of the cluster and the actions
// that move it one step towards health. It is pure; every rule is a named case in
// decide_test.go.
func Decide(in Input) Decision {
	d := decideTopology(in)
	if a, ok := narrowAccounts(in, d); ok {
		d.Actions = append(d.Actions, a) // before the application account: its users account may be new
		d.Healthy = false
	}
	if a, ok := ensureApplication(in, d); ok {
		d.Actions = append(d.Actions, a)
		d.Healthy = false // not settled until the account is there
	}
	if a, ok := rotatePasswords(in, d); ok {
		d.Actions = append(d.Actions, a)
	}
	for _, i := range in.Instances {
		if in.Fenced[i.Name] {
			d.Fenced = append(d.Fenced, i.Name)
			continue // left alone: its certificate and settings are seen to once unfenced
		}
		if i.ReloadTLS && i.Reachable && !i.Cloning {
			d.Actions = append(d.Actions, Action{Kind: ActReloadTLS, Target: i.Name})
		}
		if len(i.Settings) > 0 && i.Reachable && !i.Cloning {
			d.Actions = append(d.Actions, Action{Kind: ActApplySettings, Target: i.Name, Settings: i.Settings})
		}
	}
	return d
}

// decideTopology decides the roles and replication; Decide adds the certificate reloads and
// the online settings.
func decideTopology(in Input) Decision {
	byName := map[string]*Instance{}
	for i := range in.Instances {
		byName[in.Instances[i].Name] = &in.Instances[i]
	}
	var d Decision
	p := byName[in.Primary]
	down := p == nil || !p.Reachable
	switch {
	case in.Primary == "":
		d = bootstrap(in)
	case down:
		if in.FailoverRequest == in.Primary && !in.Fenced[in.Primary] {
			// A manual failover: at once, whatever the spec says; the quorum rule holds.
			in.FailoverEnabled, in.DetectionDelay = true, 0
		}
		d = primaryDown(in, p)
	default:
		d = primaryUp(in, p)
	}
	d.Request, d.RequestNote = judgeRequest(in, down, d)
	return d
}

// bootstrap elects the first primary: only once every instance answers (a new cluster's
// instances start together), and only an instance that holds every transaction any other
// holds, so that none becomes errant.
func bootstrap(in Input) Decision {
	d := Decision{Roles: noRoles(in)}
	var down []string
	for _, i := range in.Instances {
		switch {
		case in.Fenced[i.Name]:
			down = append(down, i.Name+" (fenced)")
		case !i.Reachable:
			down = append(down, i.Name+" ("+i.Error+")")
		}
	}
	if len(in.Instances) == 0 || len(down) > 0 {
		d.State, d.Reason = StateIncomplete, mysqlv1beta1.ReasonWaitingForInstances
		d.Message = "waiting for every instance to answer before electing the first primary: " + strings.Join(down, ", ")
		d.RequeueAfter = 2 * time.Second
		return d
	}
	cand := mostAdvanced(in.Instances, in.Desired)
	if cand == nil {
		d.State, d.Reason = StateErrant, mysqlv1beta1.ReasonInstancesDiverged
		d.Message = "no instance holds every transaction the others hold; choose the primary and re-clone the others by hand"
		return d
	}
	d.State, d.Reason, d.Primary = StateBootstrapping, mysqlv1beta1.ReasonBootstrap, cand.Name
	d.Message = "electing " + cand.Name + " as the first primary"
	d.Actions = []Action{{Kind: ActBootstrap, Target: cand.Name}}
	d.Roles[cand.Name] = resources.RolePrimary
	return d
}

// mostAdvanced returns the instance whose transactions (executed and received) include every
// other's. Among several, preferred wins, then the one with the least left to apply (its
// promotion waits until it has applied everything: a replica that joined minutes before
// and was still catching up made a crash's failover wait out CatchUpTimeout, 10 s, while
// another had applied it all), then the lowest index. nil when histories diverged.
func mostAdvanced(instances []Instance, preferred string) *Instance {
	var best *Instance
	for k := range instances {
		c := &instances[k]
		covers := true
		for _, o := range instances {
			if !c.has().Contains(o.has()) {
				covers = false
				break
			}
		}
		switch {
		case !covers:
		case best == nil, c.Name == preferred:
			best = c
		case best.Name != preferred && backlog(c) < backlog(best):
			best = c
		}
	}
	return best
}

// backlog is how many transactions an instance received and has not applied yet.
func backlog(i *Instance) int64 { return i.has().Subtract(i.Executed).Count() }

// primaryDown handles a recorded primary that does not answer (or no longer exists):
// wait out the detection delay, check that enough replicas are reached to prove that no
// acknowledged write can be lost (quorum), freeze every candidate's receiver, then promote
// the candidate that received the most, after it has applied all of it.
func primaryDown(in Input, p *Instance) Decision {
	if d, wait := waitForPrimary(in, p); wait {
		return d
	}
	d := Decision{Roles: noRoles(in)}
	name := in.Primary
	d.State, d.Reason = StateFailover, mysqlv1beta1.ReasonFailover
	for _, i := range in.Instances {
		// Another writable instance is fenced before anything else, as with a primary up.
		if i.Name != name && i.Reachable && i.Writable {
			d.Actions = append(d.Actions, Action{Kind: ActFence, Target: i.Name})
		}
	}
	if len(d.Actions) > 0 {
		d.Primary = name
		d.Message = fmt.Sprintf("primary %s lost: fencing writable replicas before choosing a successor", name)
		d.RequeueAfter = time.Millisecond
		return d
	}
	cands, unfit := candidates(in, name)
	if len(cands) == 0 && len(unfit) == 0 {
		d.State, d.Reason = StateLost, mysqlv1beta1.ReasonNoFailoverCandidate
		d.Message = fmt.Sprintf("primary %s is lost and the cluster has no replica to replace it", name)
		d.RequeueAfter = 5 * time.Second
		return d
	}
	if need := quorum(in); len(cands) < need {
		d.State, d.Reason, d.Primary = StateFailoverBlocked, mysqlv1beta1.ReasonFailoverBlocked, name
		// The primary keeps its label: it may still serve its clients, and nobody else can.
		d.Roles[name] = resources.RolePrimary
		d.Message = fmt.Sprintf("primary %s lost; %d of %d replicas unreachable or unfit (%s): "+
			"a failover needs %d frozen to prove no acknowledged write is lost (waitForReplicaCount %d)",
			name, len(unfit), len(cands)+len(unfit), strings.Join(unfit, ", "), need, in.AckCount)
		d.RequeueAfter = time.Second
		markReplicas(in, &d, name)
		return d
	}
	var freeze []Action
	for _, c := range cands {
		// A receiver reconnecting to the lost primary would acknowledge its commits again
		// once it gets through: it is stopped as well.
		if c.IORunning || c.IOConnecting {
			freeze = append(freeze, Action{Kind: ActFreeze, Target: c.Name})
		}
	}
	// A primary that is there but does not answer (hung, or cut off from the operator) may
	// still be writable: its kubelet is asked to kill it. One that refuses connections runs
	// no mysqld, and the next one its kubelet starts is read-only by its configuration.
	if p != nil && !p.Stopped && !p.Evicting && p.Fault != mysql.FaultRefused {
		freeze = append(freeze, Action{Kind: ActEvict, Target: name})
	}
	if len(freeze) > 0 {
		d.Actions, d.Primary = freeze, name
		d.Message = fmt.Sprintf("primary %s lost: stopping every replica's receiver before choosing a successor", name)
		d.RequeueAfter = time.Millisecond
		return d
	}
	best := mostAdvanced(cands, in.Desired)
	if p != nil && p.Evicting && !p.Stopped {
		d.Primary = name
		if best != nil {
			// The successor is put behind the primary Service already: it refuses writes
			// until it is promoted, and the Service's endpoints catch up meanwhile.
			d.Roles[best.Name] = resources.RolePrimary
		}
		d.Message = fmt.Sprintf("primary %s lost: waiting for its kubelet to stop it before promoting a successor", name)
		d.RequeueAfter = 100 * time.Millisecond // such a pass reads only the replicas
		return d
	}
	if best == nil {
		d.State, d.Reason = StateErrant, mysqlv1beta1.ReasonInstancesDiverged
		d.Message = fmt.Sprintf("primary %s lost and the replicas received diverging transactions; promote one by hand", name)
		return d
	}
	d.Primary = best.Name
	d.Roles[best.Name] = resources.RolePrimary
	d.Actions = []Action{{Kind: ActPromote, Target: best.Name, From: name, WaitFor: best.has(), Failover: true}}
	d.Message = fmt.Sprintf("primary %s lost: promoting %s (%d transactions)", name, best.Name, best.has().Count())
	d.RequeueAfter = time.Millisecond
	return d
}

// waitForPrimary is the decision to wait for a primary that does not answer, rather than
// fail over, when the primary is fenced, failover is disabled, or the detection delay has
// not passed; wait is false otherwise. The replicas that still replicate serve reads
// meanwhile.
func waitForPrimary(in Input, p *Instance) (d Decision, wait bool) {
	d = Decision{Roles: noRoles(in), State: StatePrimaryUnreachable, Primary: in.Primary, RequeueAfter: 5 * time.Second}
	name := in.Primary
	switch {
	case in.Fenced[name]:
		d.Reason = mysqlv1beta1.ReasonInstanceFenced
		d.Message = fmt.Sprintf("primary %s is fenced and does not answer (%s); no failover while it is fenced", name, orUnknown(errorOf(p)))
	case p != nil && !in.FailoverEnabled:
		d.Reason = mysqlv1beta1.ReasonFailoverDisabled
		d.Message = fmt.Sprintf("primary %s is unreachable (%s) and automatic failover is disabled", name, p.Error)
	case p != nil && p.UnreachableFor < in.DetectionDelay:
		d.Reason = mysqlv1beta1.ReasonPrimaryUnavailable
		d.Roles[name] = resources.RolePrimary
		d.Message = fmt.Sprintf("primary %s unreachable for %s (%s); failover after %s", name,
			p.UnreachableFor.Round(100*time.Millisecond), p.Error, in.DetectionDelay)
		d.RequeueAfter = in.DetectionDelay - p.UnreachableFor
	default:
		return Decision{}, false
	}
	markReplicas(in, &d, name)
	return d, true
}

// candidates splits the replicas of a lost primary into those that may replace it and the
// others, each with why not. A writable instance took writes nobody replicated; one that
// never replicated (an empty new one) or is being cloned holds nothing to go by.
func candidates(in Input, primary string) ([]Instance, []string) {
	var cands []Instance
	var unfit []string
	for _, i := range in.Instances {
		switch {
		case i.Name == primary:
		case in.Fenced[i.Name]:
			unfit = append(unfit, i.Name+" fenced")
		case !i.Reachable:
			unfit = append(unfit, fmt.Sprintf("%s unreachable: %s", i.Name, orUnknown(string(i.Fault))))
		case i.Writable:
			unfit = append(unfit, i.Name+" writable")
		case i.Cloning:
			unfit = append(unfit, i.Name+" being cloned")
		case i.Received == nil:
			unfit = append(unfit, i.Name+" never replicated")
		default:
			cands = append(cands, i)
		}
	}
	return cands, unfit
}

// quorum is how many replicas a failover must reach and freeze: with N instances and
// each commit acknowledged by W replicas, any N-W of the N-1 replicas include one that
// acknowledged it (N-W + W > N-1), so the most advanced of them holds every acknowledged
// write. Without semi-sync (W = 0) nothing is acknowledged by a replica: every replica is
// then required, the most the operator can check. docs/design/topology.md has the proof.
func quorum(in Input) int {
	replicas := len(in.Instances) - 1
	return min(replicas, len(in.Instances)-in.AckCount)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// markReplicas keeps the replicas that still replicate in the replicas Service while the
// primary is only briefly away.
func markReplicas(in Input, d *Decision, primary string) {
	for _, i := range in.Instances {
		if i.Name != primary && i.Reachable && i.Source == primary && i.SQLRunning && !i.Writable && !in.Fenced[i.Name] {
			d.Roles[i.Name] = resources.RoleReplica
		}
	}
}

// primaryUp handles a reachable recorded primary: fence anyone else writable, finish a
// promotion or a switchover, then make every replica replicate from it.
func primaryUp(in Input, p *Instance) Decision {
	if in.Fenced[p.Name] {
		return fencedPrimary(in, p)
	}
	d := Decision{Primary: p.Name, Roles: noRoles(in), State: StateHealthy, Reason: mysqlv1beta1.ReasonReplicationHealthy}
	var notes []string
	for _, i := range in.Instances {
		if in.Fenced[i.Name] {
			// Before anything else, as a rogue writer is: the fence is why it is listed.
			if a, ok := isolateFenced(i); ok {
				d.Actions = append(d.Actions, a)
			}
			continue
		}
		if i.Name != p.Name && i.Reachable && i.Writable {
			d.Actions = append(d.Actions, Action{Kind: ActFence, Target: i.Name})
			d.State, d.Reason = StateDegraded, mysqlv1beta1.ReasonRogueWriterFenced
			notes = append(notes, i.Name+" was writable and has been fenced")
		}
	}
	if !p.Writable || p.Source != "" {
		d.Actions = append(d.Actions, promote(in, p))
		d.State, d.Reason = StateFailover, mysqlv1beta1.ReasonConfiguring
		d.Message = "making " + p.Name + " writable once it has applied everything it received"
		d.Roles[p.Name] = resources.RolePrimary
		d.RequeueAfter = time.Millisecond
		return d
	}
	d.Roles[p.Name] = resources.RolePrimary
	if p.SemiSyncSource != in.SemiSync {
		d.Actions = append(d.Actions, Action{Kind: ActConfigurePrimary, Target: p.Name})
	}
	in.Desired = successor(in, p)
	if sw, ok := switchover(in, p, &d); ok {
		d.Actions = append(d.Actions, sw...)
		markReplicas(in, &d, p.Name)
		d.Roles[p.Name], d.Roles[sw[0].Target] = resources.RoleNone, resources.RolePrimary
		return d
	}
	// A blocked switchover's note comes first; a worse state found below still wins.
	if d.Message != "" {
		switch {
		case in.Leaving[p.Name]:
			d.Message = "the scale-down removes primary " + p.Name + ": " + d.Message
		case in.HandOver[p.Name]:
			d.Message = "the roll restarts primary " + p.Name + " next: " + d.Message
		}
		notes = append([]string{d.Message}, notes...)
	}
	notes = append(notes, replicas(in, p, &d)...)
	for name := range in.Leaving {
		// Readers leave an instance the scale-down removes before its pod goes.
		if d.Roles[name] == resources.RoleReplica {
			d.Roles[name] = resources.RoleNone
		}
	}
	d.Message = strings.Join(notes, "; ")
	if len(d.Actions) > 0 && d.RequeueAfter == 0 {
		d.RequeueAfter = time.Second
	}
	d.Healthy = d.State == StateHealthy && len(d.Actions) == 0
	for _, i := range in.Instances {
		if d.Roles[i.Name] == resources.RoleReplica && p.Executed.Subtract(i.Executed).Count() <= CaughtUpSlack {
			d.CaughtUp = append(d.CaughtUp, i.Name)
		}
	}
	if d.Healthy {
		d.Message = fmt.Sprintf("%s is primary; %d replicas replicate from it", p.Name, len(in.Instances)-1)
	}
	return d
}

// promote finishes making p the primary: p must first apply what it received and, when it
// still replicates from an instance that has more (an interrupted switchover), that too.
// Not when that instance is the primary a failover replaced (an interrupted failover): p's
// receiver is frozen, and what the failed primary holds beyond p nobody acknowledged, so
// the wait could never end (the chaos suite saw a cluster stuck that way).
func promote(in Input, p *Instance) Action {
	wait := p.has()
	for _, i := range in.Instances {
		if i.Name == p.Source && i.Reachable && i.Name != in.FailedPrimary {
			wait = wait.Union(i.Executed)
		}
	}
	return Action{Kind: ActPromote, Target: p.Name, WaitFor: wait}
}

// successor is the instance the primary should be: spec.primary, unless the primary p must
// hand over (a scale-down removes it, or the roll restarts it next) and spec.primary does not
// name an instance that may take over; then the closest of those that replicate from p
// cleanly (the lowest ordinal on a tie), or, when none does yet, the first that may, for
// switchover to say what it waits for.
func successor(in Input, p *Instance) string {
	mustGo := func(name string) bool { return in.Leaving[name] || in.HandOver[name] }
	switch {
	case !mustGo(p.Name) && mustGo(in.Desired):
		return "" // spec.primary is about to restart: it is switched to once it is back
	case !mustGo(p.Name) || (in.Desired != "" && !mustGo(in.Desired)):
		return in.Desired
	}
	best, first, lag := "", "", int64(-1)
	for k := range in.Instances {
		i := &in.Instances[k]
		if mustGo(i.Name) || i.Name == p.Name || in.Fenced[i.Name] {
			continue
		}
		if first == "" {
			first = i.Name
		}
		if !i.Reachable || i.Writable || !i.replicating(p.Name) || !i.errantAgainst(p).IsEmpty() {
			continue
		}
		if l := p.Executed.Subtract(i.Executed).Count(); lag < 0 || l < lag {
			best, lag = i.Name, l
		}
	}
	if best == "" {
		return first
	}
	return best
}

// switchover returns the actions of a requested, possible switchover. ok is false when no
// switchover is requested or it must wait (the reason is then in d).
func switchover(in Input, p *Instance, d *Decision) ([]Action, bool) {
	if in.Desired == "" || in.Desired == p.Name {
		return nil, false
	}
	var t *Instance
	for k := range in.Instances {
		if in.Instances[k].Name == in.Desired {
			t = &in.Instances[k]
		}
	}
	blocked := func(why string) ([]Action, bool) {
		d.State, d.Reason = StateDegraded, mysqlv1beta1.ReasonSwitchoverBlocked
		d.Message = "switchover to " + in.Desired + " waits: " + why
		return nil, false
	}
	switch {
	case t == nil:
		return blocked("no such instance")
	case in.Fenced[t.Name]:
		return blocked("it is fenced")
	case !t.Reachable:
		return blocked("it is unreachable")
	case !t.errantAgainst(p).IsEmpty():
		return blocked("it holds errant transactions " + t.errantAgainst(p).String())
	case !t.replicating(p.Name):
		return blocked("it does not replicate from " + p.Name + " yet")
	}
	d.State, d.Reason, d.Primary = StateSwitchover, mysqlv1beta1.ReasonSwitchover, t.Name
	d.Message = fmt.Sprintf("switching over from %s to %s", p.Name, t.Name)
	d.RequeueAfter = time.Millisecond
	// In the same pass, the old primary and every replica that cleanly replicates from it
	// follow the new one (act runs them side by side): the new primary's commits wait for
	// a semi-sync acknowledgement until one of them replicates from it. A replica with
	// errant transactions is left for the next pass to judge.
	acts := []Action{{Kind: ActSwitchover, Target: t.Name, From: p.Name},
		{Kind: ActConfigureReplica, Target: p.Name, From: t.Name}}
	for k := range in.Instances {
		i := &in.Instances[k]
		if i.Name != t.Name && i.Name != p.Name && i.Reachable && !i.Writable && i.replicating(p.Name) &&
			i.errantAgainst(p).IsEmpty() && !in.Fenced[i.Name] {
			acts = append(acts, Action{Kind: ActConfigureReplica, Target: i.Name, From: t.Name})
		}
	}
	return acts, true
}

// replicas decides for each non-primary instance and returns notes on unhealthy ones.
func replicas(in Input, p *Instance, d *Decision) []string {
	var notes []string
	degrade := func(reason, note string) {
		if d.State == StateHealthy || d.State == StateDegraded {
			d.State, d.Reason = StateDegraded, reason
		}
		notes = append(notes, note)
	}
	for _, r := range in.Instances {
		if r.Name == p.Name {
			continue
		}
		if in.Fenced[r.Name] {
			degrade(mysqlv1beta1.ReasonInstanceFenced, fencedNote(r))
			continue
		}
		if !r.Reachable {
			degrade(mysqlv1beta1.ReasonInstanceUnreachable, fmt.Sprintf("%s is unreachable (%s)", r.Name, r.Error))
			continue
		}
		if r.Cloning {
			// Nothing is asked of it until the clone ends (and mysqld restarts).
			if d.State != StateErrant {
				d.State, d.Reason = StateCloning, mysqlv1beta1.ReasonCloning
			}
			notes = append(notes, r.Name+" is being cloned")
			continue
		}
		// Gather reads the primary last, so a replica's executed set can only lack the
		// primary's transactions, never have more (but for one in flight, see
		// errantAgainst): anything more is errant.
		if errant := r.errantAgainst(p); !errant.IsEmpty() {
			if in.Reclone[r.Name] {
				d.Actions = append(d.Actions, Action{Kind: ActClone, Target: r.Name, From: p.Name})
				d.State, d.Reason = StateCloning, mysqlv1beta1.ReasonCloning
				notes = append(notes, r.Name+" is re-cloned from "+p.Name+", discarding errant transactions "+errant.String())
				continue
			}
			if r.IORunning || r.SQLRunning {
				d.Actions = append(d.Actions, Action{Kind: ActIsolate, Target: r.Name})
			}
			d.State, d.Reason = StateErrant, mysqlv1beta1.ReasonErrantTransactions
			notes = append(notes, fmt.Sprintf("%s holds errant transactions %s; it is kept out of service "+
				"(annotate the cluster with mysql.dolphin-operator.io/reclone=%s to re-clone it)", r.Name, errant, r.Name))
			continue
		}
		missing := p.Executed.Subtract(r.Executed)
		if r.Received == nil && r.Executed.IsEmpty() && !missing.IsEmpty() && cloneUnderWay(in, d) {
			// A donor serves one clone at a time (MySQL's error 3634 otherwise).
			notes = append(notes, r.Name+" is new: it is cloned after the clone under way")
			if d.State != StateErrant {
				d.State, d.Reason = StateCloning, mysqlv1beta1.ReasonCloning
			}
			continue
		}
		if r.Received == nil && r.Executed.IsEmpty() && !missing.IsEmpty() {
			// A new instance (a scale-up) is seeded with a copy of the primary's data
			// rather than replaying its whole binary log, and serves no reads until then
			// (on the real-node ground one replaying it was 9,000 transactions behind
			// after a minute, in the replicas Service).
			d.Actions = append(d.Actions, Action{Kind: ActClone, Target: r.Name, From: p.Name})
			if d.State != StateErrant {
				d.State, d.Reason = StateCloning, mysqlv1beta1.ReasonCloning
			}
			notes = append(notes, r.Name+" is new: cloning it from "+p.Name)
			continue
		}
		if !missing.Intersect(p.Purged).IsEmpty() {
			d.Actions = append(d.Actions, Action{Kind: ActClone, Target: r.Name, From: p.Name})
			if d.State != StateErrant {
				d.State, d.Reason = StateCloning, mysqlv1beta1.ReasonCloning
			}
			notes = append(notes, r.Name+" lacks transactions "+p.Name+" no longer has in its binary log: cloning it")
			continue
		}
		// A replica with semi-sync's source side on (an old primary whose reconfiguration
		// was cut short after replication started) would hold every commit its applier
		// makes waiting for acknowledgements nobody sends.
		if !r.replicating(p.Name) || r.Writable || r.SemiSyncReplica != in.SemiSync || r.SemiSyncSource || r.ChannelOutdated {
			d.Actions = append(d.Actions, Action{Kind: ActConfigureReplica, Target: r.Name, From: p.Name})
			why := "configuring replication from " + p.Name
			if r.ReplicationError != "" {
				why = "replication stopped (" + r.ReplicationError + "); restarting it"
				degrade(mysqlv1beta1.ReasonReplicationBroken, r.Name+": "+why)
			} else {
				notes = append(notes, r.Name+": "+why)
				if d.State == StateHealthy {
					d.State, d.Reason = StateDegraded, mysqlv1beta1.ReasonConfiguring
				}
			}
			continue
		}
		d.Roles[r.Name] = resources.RoleReplica
	}
	sort.Strings(notes)
	return notes
}

// cloneUnderWay reports whether an instance is being cloned or the decision clones one.
func cloneUnderWay(in Input, d *Decision) bool {
	for _, i := range in.Instances {
		if i.Cloning {
			return true
		}
	}
	for _, a := range d.Actions {
		if a.Kind == ActClone {
			return true
		}
	}
	return false
}

// noRoles labels every instance with no role, for a decision to give some a role.
func noRoles(in Input) map[string]resources.Role {
	out := make(map[string]resources.Role, len(in.Instances))
	for _, i := range in.Instances {
		out[i.Name] = resources.RoleNone
	}
	return out
}

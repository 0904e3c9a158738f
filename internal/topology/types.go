// Package topology keeps one writable primary and replicas that replicate from it, for one
// MySQLCluster at a time, in three steps: gather (read every instance over SQL), decide (a
// pure function from what was read to one state and the actions to take) and act (carry the
// actions out, each step idempotent, so a pass interrupted anywhere is finished by the next).
// docs/design/topology.md states the invariants the decision keeps.
package topology

import (
	"time"

	"github.com/dolphin-operator/dolphin/internal/gtid"
	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// Instance is what gather learned about one instance.
type Instance struct {
	Name  string
	Index int
	// UUID is its server_uuid, in lower case ("" when unreachable).
	UUID string
	// Reachable means its status could be read; Error says why not, and Fault what kind
	// of failure that was (refused, no answer, ...).
	Reachable bool
	Error     string
	Fault     mysql.Fault
	// UnreachableFor is how long it has been unreachable without a break (0 when reachable).
	UnreachableFor time.Duration
	// Writable means neither read_only nor super_read_only is on.
	Writable bool
	Executed gtid.Set
	Purged   gtid.Set
	// Received is what its replication channel has received (nil when it has none).
	Received gtid.Set
	// Source is the instance it replicates from ("" when it does not, "?" when the source
	// address matches no instance of the cluster).
	Source                string
	IORunning, SQLRunning bool
	// IOConnecting: its receiver is reconnecting to its source (not receiving now, but it
	// may any moment: a failover must stop it too).
	IOConnecting     bool
	ReplicationError string
	SemiSyncSource   bool
	SemiSyncReplica  bool
	// SemiSyncClients is how many semi-sync replicas are connected to it (as a source).
	SemiSyncClients int
	// Evicting: its pod's deletion was asked for. Stopped: no mysqld of it can still run
	// (no pod, its kubelet reports its mysqld container not running, its pod is being
	// deleted and its port refuses connections, or its deletion was asked EvictionWait ago
	// and its kubelet shows no sign of life since, or EvictionCap ago: see eviction.go).
	Evicting, Stopped bool
	// Cloning: a clone into this instance is under way (its data is being replaced);
	// CloneError is the error of its last clone when that failed.
	Cloning    bool
	CloneError string
	// ChannelOutdated: its replication channel checks its source's certificate otherwise
	// than the operator now asks (a channel an earlier release set up without checks).
	ChannelOutdated bool
	// ReloadTLS: it serves a certificate other than the TLS Secret's (renewed since mysqld
	// read it), and no reload was tried within TLSReloadInterval (TLSReloadRetry after one
	// mysqld refused).
	ReloadTLS bool
	// Settings are the online settings it runs with other values than the spec's, to set
	// (the value for SET GLOBAL by variable name; none when they were set SettingsRetry ago).
	Settings map[string]any
}

// replicating reports whether the instance applies from source with both threads running.
func (i *Instance) replicating(source string) bool {
	return i.Source == source && i.IORunning && i.SQLRunning
}

// errantAgainst is what the instance executed that primary p did not: transactions
// nobody but the instance itself (or a former primary) can have written. The primary's own
// transactions are left out: a GTID of p's server_uuid can only come from p's binary log.
// On the real-node ground a replica was read holding one that p's later read lacked, right
// after a failover; the likely window is semi-sync's AFTER_SYNC point, where the replica
// can apply a transaction between p receiving the acknowledgement and p's engine commit.
func (i *Instance) errantAgainst(p *Instance) gtid.Set {
	return i.Executed.Subtract(p.Executed).WithoutSource(p.UUID)
}

// has is everything the instance holds or has been sent: what a promotion must apply first.
func (i *Instance) has() gtid.Set {
	if i.Received == nil {
		return i.Executed
	}
	return i.Executed.Union(i.Received)
}

// Input is everything Decide looks at.
type Input struct {
	// Instances are the cluster's instances in index order.
	Instances []Instance
	// Primary is the primary recorded in the cluster's Lease ("" before the first election).
	Primary string
	// Desired is spec.primary: the instance that should be primary. It is honoured whenever
	// it is a healthy replica, so after a failover away from it the cluster switches back
	// once it has rejoined (leave spec.primary empty to keep the failover's choice).
	Desired string
	// FailoverEnabled and DetectionDelay are spec.replication.failover.
	FailoverEnabled bool
	DetectionDelay  time.Duration
	// SemiSync is whether semi-sync should be on (enabled and the cluster has replicas).
	SemiSync bool
	// AckCount is how many replicas acknowledge each commit (semi-sync's wait count, at
	// most the number of replicas); 0 without semi-sync.
	AckCount int
	// Reclone names instances the user allowed to be re-cloned although they hold errant
	// transactions (the annotation mysql.dolphin-operator.io/reclone).
	Reclone map[string]bool
	// FailedPrimary is the primary the last failover replaced, until it replicates again
	// (the Lease's note): what it holds beyond its successor nobody acknowledged.
	FailedPrimary string
	// Leaving are instances a scale-down removes; their pods still run. A leaving primary
	// hands over to an instance that stays before the StatefulSet may remove it.
	Leaving map[string]bool
	// HandOver are instances whose pods the reconciler's roll restarts next, once they are
	// no longer primary (the pod annotation mysql.dolphin-operator.io/hand-over): a primary
	// among them switches over to an instance that is not, as a leaving one does.
	HandOver map[string]bool
	// Fenced are the instances the user asked to fence (the annotation
	// mysql.dolphin-operator.io/fenced-instances): read-only, replication stopped, out of
	// both Services, otherwise left alone and never promoted.
	Fenced map[string]bool
	// FailoverRequest is the primary a manual failover is asked to replace (the annotation
	// mysql.dolphin-operator.io/failover), "" when none is asked for.
	FailoverRequest string
	// Application is spec.application's account (nil without one, or before its Secret
	// exists), and whether the primary has it as its Secret says.
	Application *Application
	// AccountsWide: the primary's admin account has the privileges of an earlier release,
	// which narrowing takes away.
	AccountsWide bool
	// Rotation is the step a rotation of the operator's passwords asks of the primary
	// (nil: none).
	Rotation *PasswordRotation
}

// CaughtUpSlack is how many of the primary's transactions a replica may lack and still count
// as caught up: gather reads the primary last, so under writes a replica that applies as
// fast as they come lacks the few committed between the two reads.
const CaughtUpSlack = 50

// State is the one word that sums the cluster's topology up.
type State string

// States Decide reports.
const (
	StateHealthy            State = "Healthy"
	StateDegraded           State = "Degraded"
	StateIncomplete         State = "Incomplete"
	StateBootstrapping      State = "Bootstrapping"
	StatePrimaryUnreachable State = "PrimaryUnreachable"
	StateFailover           State = "Failover"
	StateSwitchover         State = "Switchover"
	StateErrant             State = "Errant"
	StateFailoverBlocked    State = "FailoverBlocked"
	StateCloning            State = "Cloning"
	StateLost               State = "Lost"
	// StateFenced: the primary is fenced on the user's request and nobody takes writes.
	StateFenced State = "Fenced"
)

// RequestOutcome is what a pass made of a manual failover request.
type RequestOutcome string

// Outcomes of a manual failover request ("" when there is none).
const (
	// RequestCarriedOn: the failover runs; the request stays until it is done.
	RequestCarriedOn RequestOutcome = "CarriedOn"
	// RequestDone: the failover's promotion is decided (or was carried out already).
	RequestDone RequestOutcome = "Done"
	// RequestRefused: the failover may not run (the note says why).
	RequestRefused RequestOutcome = "Refused"
)

// ActionKind names one step of act.
type ActionKind string

// Actions, each carried out idempotently by act.
const (
	// ActBootstrap records Target as the first primary and makes it writable.
	ActBootstrap ActionKind = "Bootstrap"
	// ActFence makes Target read-only (super_read_only) and ends its client sessions.
	ActFence ActionKind = "Fence"
	// ActPromote waits for Target to apply WaitFor, records it as primary, makes it writable.
	ActPromote ActionKind = "Promote"
	// ActConfigurePrimary (re)applies the primary's settings (semi-sync) to Target.
	ActConfigurePrimary ActionKind = "ConfigurePrimary"
	// ActConfigureReplica points Target at From and (re)starts replication.
	ActConfigureReplica ActionKind = "ConfigureReplica"
	// ActClone replaces Target's data with a copy of From's.
	ActClone ActionKind = "Clone"
	// ActIsolate stops Target's replication and fences it (errant transactions).
	ActIsolate ActionKind = "Isolate"
	// ActFreeze stops the receiver thread of Target, so that a primary cut off from the
	// operator can no longer get acknowledgements (and thus commits) while a failover runs.
	ActFreeze ActionKind = "Freeze"
	// ActEvict deletes Target's pod (a grace period of a second), so that its kubelet kills
	// a mysqld the operator cannot reach to fence; the StatefulSet recreates the pod, whose
	// mysqld starts read-only.
	ActEvict ActionKind = "Evict"
	// ActSwitchover fences From, waits until Target has applied all of From's transactions,
	// records Target as primary and makes it writable. The decision's ConfigureReplica
	// actions that follow make From and the other replicas replicate from Target.
	ActSwitchover ActionKind = "Switchover"
	// ActReloadTLS makes Target's mysqld load its certificate files again. Reloads come
	// after every other action, so that one that fails holds nothing else up.
	ActReloadTLS ActionKind = "ReloadTLS"
	// ActEnsureApplication creates spec.application's database and account on Target, the
	// primary, and sets the account's password (binary-logged: the replicas follow).
	ActEnsureApplication ActionKind = "EnsureApplication"
	// ActNarrowAccounts narrows the accounts an earlier release made on Target, the primary
	// (binary-logged: the replicas follow); see accounts.go.
	ActNarrowAccounts ActionKind = "NarrowAccounts"
	// ActRetainPasswords gives the operator's accounts on Target, the primary, their new
	// passwords and keeps the old ones (rotation.go).
	ActRetainPasswords ActionKind = "RetainPasswords"
	// ActDiscardOldPasswords gives every replica's channel the new replication password and
	// discards the old passwords on Target, the primary (rotation.go).
	ActDiscardOldPasswords ActionKind = "DiscardOldPasswords"
	// ActApplySettings sets Target's online settings (Instance.Settings) with SET GLOBAL;
	// like reloads, these come after every other action.
	ActApplySettings ActionKind = "ApplySettings"
)

// Action is one step for act.
type Action struct {
	Kind   ActionKind
	Target string
	// From is the source (ConfigureReplica), donor (Clone) or old primary (Switchover).
	From string
	// WaitFor is the GTID set Promote waits for Target to have applied.
	WaitFor gtid.Set
	// Failover marks a Promote that replaces a lost primary (From): the lost primary may
	// then be re-cloned when it returns with transactions nobody acknowledged.
	Failover bool
	// Settings are the online settings ApplySettings sets.
	Settings map[string]any
}

// Decision is what Decide chose.
type Decision struct {
	State State
	// Actions run in order; act stops at the first that fails.
	Actions []Action
	// Primary is the primary once the actions are done ("" when there is none).
	Primary string
	// Roles label each instance's pod once the actions are done.
	Roles map[string]resources.Role
	// Healthy is true when every instance replicates from a writable primary.
	Healthy bool
	// CaughtUp are the replicas (in the replicas Service) that lack at most CaughtUpSlack
	// of the primary's transactions, in index order.
	CaughtUp []string
	// Reason (CamelCase) and Message explain the state.
	Reason, Message string
	// RequeueAfter asks for the next pass sooner than the resync period.
	RequeueAfter time.Duration
	// Fenced are the instances held fenced, in index order.
	Fenced []string
	// Request is what becomes of Input.FailoverRequest, and RequestNote why: a request
	// done or refused is withdrawn once the pass's actions are carried out.
	Request     RequestOutcome
	RequestNote string
}

package topology

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// The MySQL side of a rotation of the operator's passwords (resources/rotation.go says
// how the reconciler moves the credentials Secret through its phases). Two actions, each
// on the primary (binary-logged: the replicas follow), each noted in the primary Lease
// once done so that the reconciler takes the next step:
//   - RetainPasswords, while the Secret holds the new passwords beside the current ones:
//     each account accepts its new password and keeps its current one (the admin account
//     changes its own; the users account the others' and its own).
//   - DiscardOldPasswords, once every pod uses the new passwords: each replica's channel
//     takes the new replication password, then the old passwords are discarded.
//
// Both wait for the whole cluster to be in step (inStep): an instance that did not answer
// would miss the change (and keep the old password in its channel).

// PasswordRotation is the rotation step the primary is to take (Input.Rotation).
type PasswordRotation struct {
	Phase resources.RotationPhase
	Ask   string
	// Done: the primary Lease notes this phase's step as taken for Ask.
	Done bool
}

// loadRotation reads the rotation the credentials Secret is in, and its new passwords.
func (cl *cluster) loadRotation(secret *corev1.Secret) {
	cl.rotation = resources.CredentialsRotation(secret)
	if cl.rotation.Phase != resources.RotationRetaining {
		return
	}
	cl.nextPasswords = map[string]string{}
	for i, k := range resources.RotatedKeys {
		cl.nextPasswords[resources.RotatedAccounts[i]] = string(secret.Data[resources.NextKey(k)])
	}
}

// rotationInput is what Decide needs of the rotation (nil when none runs or its phase is
// not the topology's).
func (cl *cluster) rotationInput() *PasswordRotation {
	switch cl.rotation.Phase {
	case resources.RotationRetaining:
		return &PasswordRotation{Phase: cl.rotation.Phase, Ask: cl.rotation.Ask, Done: cl.passwordsRetained == cl.rotation.Ask}
	case resources.RotationDiscarding:
		return &PasswordRotation{Phase: cl.rotation.Phase, Ask: cl.rotation.Ask, Done: cl.passwordsDiscarded == cl.rotation.Ask}
	}
	return nil
}

// rotatePasswords is the rotation's action on the primary, when one is due, the primary
// is one maintenance may run on (maintainedPrimary) and the whole cluster is in step
// (inStep).
func rotatePasswords(in Input, d Decision) (Action, bool) {
	r := in.Rotation
	if r == nil || r.Done || r.Ask == "" || (r.Phase != resources.RotationRetaining && r.Phase != resources.RotationDiscarding) {
		return Action{}, false
	}
	p, ok := maintainedPrimary(in, d)
	if !ok || !inStep(in, p) {
		return Action{}, false
	}
	if r.Phase == resources.RotationRetaining {
		return Action{Kind: ActRetainPasswords, Target: p}, true
	}
	return Action{Kind: ActDiscardOldPasswords, Target: p}, true
}

// inStep: every instance answers and replicates from primary p with its receiver
// connected, and p has the semi-sync replicas its commits wait for. A rotation's
// statements change accounts on p: binary-logged, they wait for an acknowledgement like
// any commit, and while one waits p admits no new login (the account cache stays locked).
// An instance that did not answer would also miss the change until it catches up.
func inStep(in Input, p string) bool {
	for _, i := range in.Instances {
		switch {
		case !i.Reachable || i.Cloning:
			return false
		case i.Name == p:
			if in.SemiSync && i.SemiSyncClients < max(in.AckCount, 1) {
				return false
			}
		case i.Source != p || !i.IORunning || i.IOConnecting:
			return false
		}
	}
	return true
}

// retainPasswords makes every rotated account on t (the primary, reached as the admin
// account) accept its new password beside its current one, waits until every replica has
// applied that (so that each accepts the new passwords once the Secret swaps them in), and
// notes it in the Lease.
func (m *Manager) retainPasswords(ctx context.Context, cl *cluster, t mysql.Instance, target string) error {
	var others []mysql.PasswordChange
	for _, account := range resources.RotatedAccounts {
		if cl.nextPasswords[account] == "" {
			return fmt.Errorf("the credentials Secret has no new password for %s", account)
		}
	}
	for _, account := range usersRotates() {
		others = append(others, mysql.PasswordChange{User: account, Password: cl.nextPasswords[account]})
	}
	if err := t.RetainPasswords(ctx, []mysql.PasswordChange{{User: resources.AdminUser, Password: cl.nextPasswords[resources.AdminUser]}}); err != nil {
		if errors.Is(err, mysql.ErrNoPasswordPrivilege) {
			// Admin accounts made by 0.2.0 candidate builds before the rotation existed.
			return fmt.Errorf("%w; grant it once as root: kubectl dolphin mysql %s -e \"GRANT APPLICATION_PASSWORD_ADMIN ON *.* TO '%s'@'%%'\"",
				err, cl.obj.Name, resources.AdminUser)
		}
		return err
	}
	users, err := m.asUsers(cl, target)
	if err != nil {
		return err
	}
	defer users.Close()
	if err := users.RetainPasswords(ctx, others); err != nil {
		return err
	}
	if err := applied(ctx, cl, t, target, "the new passwords"); err != nil {
		return err
	}
	cl.passwordsRetained = cl.rotation.Ask
	return m.recordPrimary(ctx, cl, cl.recordedPrimary())
}

// discardOldPasswords points every replica's channel at t (the primary, reached as the
// admin account) again with the current replication password, one replica at a time, each
// receiving again before the next (so that the others keep acknowledging commits); then
// it discards the old passwords on t, waits until every replica has applied that, and
// notes it in the Lease.
func (m *Manager) discardOldPasswords(ctx context.Context, cl *cluster, t mysql.Instance, target string) error {
	o := m.replicaOptions(cl, target)
	o.Renew = true
	for _, name := range cl.names {
		if name == target {
			continue
		}
		h := cl.handles[name]
		if h == nil {
			return fmt.Errorf("no connection to %s", name)
		}
		if err := h.ConfigureReplica(ctx, o); err != nil {
			return err
		}
		if err := receiving(ctx, t, h, name, primaryOptions(cl)); err != nil {
			return err
		}
	}
	if err := t.DiscardOldPasswords(ctx, []string{resources.AdminUser}); err != nil {
		return err
	}
	users, err := m.asUsers(cl, target)
	if err != nil {
		return err
	}
	defer users.Close()
	if err := users.DiscardOldPasswords(ctx, usersRotates()); err != nil {
		return err
	}
	if err := applied(ctx, cl, t, target, "the discard"); err != nil {
		return err
	}
	cl.passwordsDiscarded = cl.rotation.Ask
	return m.recordPrimary(ctx, cl, cl.recordedPrimary())
}

// usersRotates are the rotated accounts whose passwords the users account changes: all
// but the admin account, which changes its own (it has SYSTEM_USER).
func usersRotates() []string {
	var out []string
	for _, account := range resources.RotatedAccounts {
		if account != resources.AdminUser {
			out = append(out, account)
		}
	}
	return out
}

// applied waits (within ctx) until every replica has applied what primary t (instance
// target) has executed: what was changed there holds on every instance.
func applied(ctx context.Context, cl *cluster, t mysql.Instance, target, what string) error {
	st, err := t.Status(ctx)
	if err != nil {
		return err
	}
	for _, name := range cl.names {
		if h := cl.handles[name]; name != target && h != nil {
			if err := h.WaitForGTID(ctx, st.GTIDExecuted, CatchUpTimeout); err != nil {
				return fmt.Errorf("%s has not applied %s yet: %w", name, what, err)
			}
		}
	}
	return nil
}

// receivingPoll is how often receiving looks.
const receivingPoll = 100 * time.Millisecond

// receiving waits (within ctx) until replica name's receiver is connected to primary p
// again and, with semi-sync, p has the replicas its commits wait for.
func receiving(ctx context.Context, p, replica mysql.Instance, name string, po mysql.PrimaryOptions) error {
	var last string
	for {
		rs, err := replica.Status(ctx)
		if err == nil {
			switch r := rs.Replica; {
			case r == nil || !r.IORunning || r.IOConnecting:
				last = fmt.Sprintf("its receiver is not connected (%+v)", r)
			default:
				ps, perr := p.Status(ctx)
				switch {
				case perr != nil:
					last = perr.Error()
				case po.SemiSync && ps.SemiSyncSourceClients < max(po.WaitForReplicaCount, 1):
					last = fmt.Sprintf("the primary has %d semi-sync replicas", ps.SemiSyncSourceClients)
				default:
					return nil
				}
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s does not replicate again with the new password: %s", name, last)
		case <-time.After(receivingPoll):
		}
	}
}

// rotationNote is what each rotation action's Event says it did.
var rotationNote = map[ActionKind]string{
	ActRetainPasswords:     "the operator's accounts accept their new passwords beside the old ones",
	ActDiscardOldPasswords: "the replicas use the new replication password and the old passwords are discarded",
}

package topology

import (
	"context"
	"fmt"

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
//     takes the new replication password, then the old passwords are discarded. It waits
//     for every instance to answer: one that did not would keep the old password in its
//     channel and fail to reconnect.

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

// rotatePasswords is the rotation's action on the primary, when one is due and the
// primary is one maintenance may run on (maintainedPrimary). The discard also waits for
// every instance to answer and the replicas to replicate from the primary.
func rotatePasswords(in Input, d Decision) (Action, bool) {
	r := in.Rotation
	if r == nil || r.Done || r.Ask == "" || (r.Phase != resources.RotationRetaining && r.Phase != resources.RotationDiscarding) {
		return Action{}, false
	}
	p, ok := maintainedPrimary(in, d)
	if !ok {
		return Action{}, false
	}
	if r.Phase == resources.RotationRetaining {
		return Action{Kind: ActRetainPasswords, Target: p}, true
	}
	for _, i := range in.Instances {
		if !i.Reachable || i.Cloning || (i.Name != p && (i.Source != p || !i.IORunning)) {
			return Action{}, false
		}
	}
	return Action{Kind: ActDiscardOldPasswords, Target: p}, true
}

// retainPasswords makes every rotated account on t (the primary, reached as the admin
// account) accept its new password beside its current one, and notes it in the Lease.
func (m *Manager) retainPasswords(ctx context.Context, cl *cluster, t mysql.Instance, target string) error {
	var others []mysql.PasswordChange
	for _, account := range resources.RotatedAccounts {
		pw := cl.nextPasswords[account]
		if pw == "" {
			return fmt.Errorf("the credentials Secret has no new password for %s", account)
		}
		if account != resources.AdminUser {
			others = append(others, mysql.PasswordChange{User: account, Password: pw})
		}
	}
	if err := t.RetainPasswords(ctx, []mysql.PasswordChange{{User: resources.AdminUser, Password: cl.nextPasswords[resources.AdminUser]}}); err != nil {
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
	cl.passwordsRetained = cl.rotation.Ask
	return m.recordPrimary(ctx, cl, cl.recordedPrimary())
}

// discardOldPasswords points every replica's channel at the primary with the current
// replication password, discards the old passwords on t (the primary, as the admin
// account) and notes it in the Lease.
func (m *Manager) discardOldPasswords(ctx context.Context, cl *cluster, t mysql.Instance, target string) error {
	for _, name := range cl.names {
		if name == target {
			continue
		}
		h := cl.handles[name]
		if h == nil {
			return fmt.Errorf("no connection to %s", name)
		}
		if err := h.SetSourcePassword(ctx, resources.ReplicationUser, cl.replicaPassword); err != nil {
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
	var others []string
	for _, account := range resources.RotatedAccounts {
		if account != resources.AdminUser {
			others = append(others, account)
		}
	}
	if err := users.DiscardOldPasswords(ctx, others); err != nil {
		return err
	}
	cl.passwordsDiscarded = cl.rotation.Ask
	return m.recordPrimary(ctx, cl, cl.recordedPrimary())
}

// rotationNote is what each rotation action's Event says it did.
var rotationNote = map[ActionKind]string{
	ActRetainPasswords:     "the operator's accounts accept their new passwords beside the old ones",
	ActDiscardOldPasswords: "the replicas use the new replication password and the old passwords are discarded",
}

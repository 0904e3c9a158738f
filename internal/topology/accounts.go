package topology

import (
	"context"
	"fmt"

	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// The operator's accounts as earlier releases made them are narrowed in place, once per
// cluster and without a restart: root over TCP is dropped, the admin account keeps only the
// privileges the operator's statements need (resources.AdminGrantStatements), the users
// account takes over the management of spec.application's account, and the readiness
// probe's account is made (the pods' new template uses it from their next restart). It runs on the
// primary (binary-logged: the replicas follow) while the admin account still holds what it
// gives away; the primary Lease notes that it is done, so that later passes do not read the
// account's privileges again.

// annotationAccounts is the Lease's note that the primary's admin account is narrowed.
const annotationAccounts = "mysql.dolphin-operator.io/accounts"

// accountsNarrowed is annotationAccounts' value.
const accountsNarrowed = "narrowed"

// readWide reads whether the recorded primary's admin account is an earlier release's,
// until the Lease notes it is not; false when that cannot be read now (next pass).
func (m *Manager) readWide(ctx context.Context, cl *cluster, in Input) bool {
	if cl.accountsNarrowed || cl.usersPassword == "" || cl.probePassword == "" {
		return false
	}
	h := cl.handles[in.Primary]
	if h == nil {
		return false
	}
	sctx, cancel := context.WithTimeout(ctx, StatusTimeout)
	defer cancel()
	wide, err := h.Wide(sctx)
	if err != nil {
		return false
	}
	cl.accountsNarrowed = !wide
	return wide
}

// narrowAccounts is the action that narrows the primary's accounts, when they are wide and
// the primary is one maintenance may run on (maintainedPrimary).
func narrowAccounts(in Input, d Decision) (Action, bool) {
	if !in.AccountsWide {
		return Action{}, false
	}
	if p, ok := maintainedPrimary(in, d); ok {
		return Action{Kind: ActNarrowAccounts, Target: p}, true
	}
	return Action{}, false
}

// narrow narrows t's accounts (t is the primary, reached as the admin account) and notes
// it in the Lease.
func (m *Manager) narrow(ctx context.Context, cl *cluster, t mysql.Instance) error {
	database := ""
	if a := cl.obj.Spec.Application; a != nil {
		database = a.Database
	}
	prepare := resources.NarrowPrepareStatements(cl.usersPassword, cl.probePassword, database)
	if err := t.NarrowAccount(ctx, mysql.NarrowOptions{Prepare: prepare, Grants: resources.AdminGrantStatements()}); err != nil {
		return err
	}
	cl.accountsNarrowed = true
	return m.recordPrimary(ctx, cl, cl.recordedPrimary())
}

// asUsers opens a connection to instance name as the users account, for what manages
// spec.application's account; the caller closes it.
func (m *Manager) asUsers(cl *cluster, name string) (mysql.Instance, error) {
	if cl.usersPassword == "" {
		return nil, fmt.Errorf("the credentials Secret has no %s yet", resources.KeyUsersPassword)
	}
	cfg, err := m.config(cl, name)
	if err != nil {
		return nil, err
	}
	cfg.User, cfg.Password = resources.UsersUser, cl.usersPassword
	return m.open(cfg)
}

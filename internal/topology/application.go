package topology

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// spec.application: the database and account applications connect with. The primary gets
// them once (binary-logged, so the replicas too), and again whenever the Secret's password
// or the spec's names change; the primary Lease keeps a digest of what was applied, so
// that no pass reads the accounts table to find out.

// annotationApplication is the Lease's note of the application account last applied: a
// digest of its database, user and password.
const annotationApplication = "mysql.dolphin-operator.io/application"

// Application is the application account the cluster should have (Input.Application).
type Application struct {
	mysql.AccountOptions
	// Applied: the primary Lease says this account was applied.
	Applied bool
}

// applicationDigest names what was applied without the password itself.
func applicationDigest(o mysql.AccountOptions) string {
	sum := sha256.Sum256([]byte(o.Database + "\x00" + o.User + "\x00" + o.Password + "\x00" + o.Previous))
	return hex.EncodeToString(sum[:16])
}

// loadApplication reads spec.application's Secret; nil without spec.application or while
// the Secret is not there yet (the reconciler makes it).
func (m *Manager) loadApplication(ctx context.Context, cl *cluster) (*Application, error) {
	a := cl.obj.Spec.Application
	if a == nil {
		return nil, nil
	}
	s := &corev1.Secret{}
	err := m.Client.Get(ctx, client.ObjectKey{Namespace: cl.obj.Namespace, Name: resources.ApplicationSecretName(cl.obj)}, s)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("while reading the application Secret: %w", err)
	}
	o := mysql.AccountOptions{Database: a.Database, User: a.ApplicationUser(), Password: string(s.Data[resources.KeyAppPassword]),
		Previous: string(s.Data[resources.KeyAppPreviousPassword])}
	if o.Password == "" {
		return nil, nil
	}
	return &Application{AccountOptions: o, Applied: cl.applicationDigest == applicationDigest(o)}, nil
}

// ensureApplication is the action that gives primary p the application account, when it
// needs one and p is one maintenance may run on (maintainedPrimary).
func ensureApplication(in Input, d Decision) (Action, bool) {
	if in.Application == nil || in.Application.Applied {
		return Action{}, false
	}
	if p, ok := maintainedPrimary(in, d); ok {
		return Action{Kind: ActEnsureApplication, Target: p}, true
	}
	return Action{}, false
}

// maintainedPrimary is the primary that account maintenance may run on in this pass: the
// decision's writable, unfenced, recorded primary, while nothing else changes who is
// primary.
func maintainedPrimary(in Input, d Decision) (string, bool) {
	if d.Primary == "" || d.Primary != in.Primary || in.Fenced[d.Primary] {
		return "", false
	}
	for _, a := range d.Actions {
		switch a.Kind {
		case ActBootstrap, ActPromote, ActSwitchover, ActFence, ActIsolate, ActEvict, ActFreeze:
			return "", false
		}
	}
	for _, i := range in.Instances {
		if i.Name == d.Primary && i.Reachable && i.Writable {
			return i.Name, true
		}
	}
	return "", false
}

// applyApplication creates the account on the primary, as the users account, and notes
// it in the Lease.
func (m *Manager) applyApplication(ctx context.Context, cl *cluster, target string, o mysql.AccountOptions) error {
	t, err := m.asUsers(cl, target)
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.EnsureAccount(ctx, o); err != nil {
		return err
	}
	cl.applicationDigest = applicationDigest(o)
	return m.recordPrimary(ctx, cl, cl.recordedPrimary())
}

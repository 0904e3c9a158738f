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
// needs one: p is the decision's writable, unfenced primary and nothing else changes who
// is primary in this pass.
func ensureApplication(in Input, d Decision) (Action, bool) {
	if in.Application == nil || in.Application.Applied || d.Primary == "" || d.Primary != in.Primary || in.Fenced[d.Primary] {
		return Action{}, false
	}
	for _, a := range d.Actions {
		switch a.Kind {
		case ActBootstrap, ActPromote, ActSwitchover, ActFence, ActIsolate, ActEvict, ActFreeze:
			return Action{}, false
		}
	}
	for _, i := range in.Instances {
		if i.Name == d.Primary && i.Reachable && i.Writable {
			return Action{Kind: ActEnsureApplication, Target: i.Name}, true
		}
	}
	return Action{}, false
}

// applyApplication creates the account on the primary and notes it in the Lease.
func (m *Manager) applyApplication(ctx context.Context, cl *cluster, t mysql.Instance, o mysql.AccountOptions) error {
	if err := t.EnsureAccount(ctx, o); err != nil {
		return err
	}
	cl.applicationDigest = applicationDigest(o)
	return m.recordPrimary(ctx, cl, cl.recordedPrimary())
}

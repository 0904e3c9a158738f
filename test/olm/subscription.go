package olm

import (
	"context"
	"fmt"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Package is Dolphin's package name in its catalog.
const Package = "dolphin-operator"

// Subscription says how to subscribe to Dolphin.
type Subscription struct {
	// Source is the CatalogSource (in OLM's namespace).
	Source string
	// Channel to follow; StartingCSV, when set, is the version installed first.
	Channel, StartingCSV string
	// Env is added to the operator's container (the Subscription's spec.config.env).
	Env []corev1.EnvVar
	// Manual leaves each InstallPlan for a human to approve (ApprovePlan); default Automatic.
	Manual bool
}

// Subscribe creates the Subscription in the operators namespace.
func (m *OLM) Subscribe(ctx context.Context, s Subscription) (*operatorsv1alpha1.Subscription, error) {
	sub := &operatorsv1alpha1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: Package, Namespace: OperatorsNamespace},
		Spec: &operatorsv1alpha1.SubscriptionSpec{
			CatalogSource: s.Source, CatalogSourceNamespace: Namespace, Package: Package,
			Channel: s.Channel, StartingCSV: s.StartingCSV,
			InstallPlanApproval: operatorsv1alpha1.ApprovalAutomatic,
		},
	}
	if s.Manual {
		sub.Spec.InstallPlanApproval = operatorsv1alpha1.ApprovalManual
	}
	if len(s.Env) > 0 {
		sub.Spec.Config = &operatorsv1alpha1.SubscriptionConfig{Env: s.Env}
	}
	if err := m.k8s.Create(ctx, sub); err != nil {
		return nil, fmt.Errorf("while subscribing to %s: %w", s.Channel, err)
	}
	return sub, nil
}

// WaitForCSV waits until the CSV name in the operators namespace is Succeeded and the
// Subscription names it as installed, and returns the CSV.
func (m *OLM) WaitForCSV(ctx context.Context, name string, timeout time.Duration) (*operatorsv1alpha1.ClusterServiceVersion, error) {
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	err := poll(ctx, timeout, "CSV "+name+" to succeed", func() error {
		if err := m.Healthy(); err != nil {
			return err
		}
		if err := m.k8s.Get(ctx, client.ObjectKey{Namespace: OperatorsNamespace, Name: name}, csv); err != nil {
			return err
		}
		if csv.Status.Phase != operatorsv1alpha1.CSVPhaseSucceeded {
			return fmt.Errorf("phase %s (%s: %s)", csv.Status.Phase, csv.Status.Reason, csv.Status.Message)
		}
		sub := &operatorsv1alpha1.Subscription{}
		if err := m.k8s.Get(ctx, client.ObjectKey{Namespace: OperatorsNamespace, Name: Package}, sub); err != nil {
			return err
		}
		if sub.Status.InstalledCSV != name {
			return fmt.Errorf("the Subscription has %q installed (state %s)", sub.Status.InstalledCSV, sub.Status.State)
		}
		return nil
	})
	return csv, err
}

// InstallPlanOf returns the InstallPlan that installed csv.
func (m *OLM) InstallPlanOf(ctx context.Context, csv string) (*operatorsv1alpha1.InstallPlan, error) {
	plans := &operatorsv1alpha1.InstallPlanList{}
	if err := m.k8s.List(ctx, plans, client.InNamespace(OperatorsNamespace)); err != nil {
		return nil, err
	}
	for i := range plans.Items {
		for _, n := range plans.Items[i].Spec.ClusterServiceVersionNames {
			if n == csv {
				return &plans.Items[i], nil
			}
		}
	}
	return nil, fmt.Errorf("no InstallPlan installs %s", csv)
}

// WaitForPlan waits until the InstallPlan that installs csv is in phase, and returns it.
func (m *OLM) WaitForPlan(ctx context.Context, csv string, phase operatorsv1alpha1.InstallPlanPhase,
	timeout time.Duration) (*operatorsv1alpha1.InstallPlan, error) {
	var plan *operatorsv1alpha1.InstallPlan
	err := poll(ctx, timeout, "the InstallPlan of "+csv+" to be "+string(phase), func() error {
		var err error
		if plan, err = m.InstallPlanOf(ctx, csv); err != nil {
			return err
		}
		if plan.Status.Phase != phase {
			return fmt.Errorf("InstallPlan %s is %q", plan.Name, plan.Status.Phase)
		}
		return nil
	})
	return plan, err
}

// ApprovePlan approves the InstallPlan that would install csv, as `kubectl patch
// installplan ... approved=true` does, once OLM has made it and it waits for approval.
func (m *OLM) ApprovePlan(ctx context.Context, csv string) (*operatorsv1alpha1.InstallPlan, error) {
	plan, err := m.WaitForPlan(ctx, csv, operatorsv1alpha1.InstallPlanPhaseRequiresApproval, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	patch := client.MergeFrom(plan.DeepCopy())
	plan.Spec.Approved = true
	if err := m.k8s.Patch(ctx, plan, patch); err != nil {
		return nil, fmt.Errorf("while approving InstallPlan %s: %w", plan.Name, err)
	}
	return plan, nil
}

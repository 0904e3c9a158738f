package olm_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/olm"
)

// The upgrade graph OLM walks is checked by two cases that share one one-node ground in
// turn, since one cluster holds one install of the package: each case ends by removing
// what it installed (its Subscription, its CSV and the InstallPlans), as a platform team
// uninstalling does, and OLM leaves the CRDs for the next, as a reinstall meets them. Each
// case has a timeline of its own. The operator's pod runs as OLM deploys it (a CSV
// succeeds only once its Deployment is available).
func TestUpgradeGraph(t *testing.T) {
	ground.Level(t, ground.Full)
	g, imgs := startGround(t, 1)
	m := installOLM(t, g.Cluster, imgs)
	for _, c := range []struct {
		name string
		run  func(*testing.T, *olm.OLM, *olm.Images, *olm.Timeline) string
	}{
		{"AHeadPublishedWithOnlyASkipRangeUpgradesAnOlderInstallOnceApproved", headWithOnlyASkipRange},
		{"ASubscriptionToCandidateGetsTheCandidateHeadOnceApproved", subscriptionToCandidate},
	} {
		if !t.Run(c.name, func(t *testing.T) {
			tl := m.Watch(olm.OperatorsNamespace, os.Stderr)
			defer tl.Stop()
			removeInstall(t, m, c.run(t, m, imgs, tl))
			removePlans(t, m)
		}) {
			return // what a failed case left installed would be the next one's
		}
	}
}

// removeInstall deletes the Subscription and the installed CSV, as docs/olm.md's uninstall
// does, waits until the CSV is gone and OLM has removed the operator's Deployment, and
// returns how long that took after the deletion.
func removeInstall(t *testing.T, m *olm.OLM, csv string) time.Duration {
	t.Helper()
	ctx := context.Background()
	k8s := m.Client()
	for _, obj := range []client.Object{
		&operatorsv1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: olm.OperatorsNamespace, Name: olm.Package}},
		&operatorsv1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: olm.OperatorsNamespace, Name: csv}},
	} {
		require.NoError(t, k8s.Delete(ctx, obj))
	}
	return ground.WaitFor(t, time.Minute, "the CSV and the operator's Deployment to go", func() error {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: olm.OperatorsNamespace, Name: csv},
			&operatorsv1alpha1.ClusterServiceVersion{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the CSV is still there (%w)", err)
		}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: olm.OperatorsNamespace, Name: operatorDeployment},
			&appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Deployment is still there (%w)", err)
		}
		return nil
	})
}

// removePlans deletes every InstallPlan and waits until they are gone: the next case's
// plans are looked up by the CSV they install, which an earlier case's may name too.
func removePlans(t *testing.T, m *olm.OLM) {
	t.Helper()
	ctx := context.Background()
	k8s := m.Client()
	require.NoError(t, k8s.DeleteAllOf(ctx, &operatorsv1alpha1.InstallPlan{}, client.InNamespace(olm.OperatorsNamespace)))
	ground.WaitFor(t, time.Minute, "the InstallPlans to go", func() error {
		plans := &operatorsv1alpha1.InstallPlanList{}
		if err := k8s.List(ctx, plans, client.InNamespace(olm.OperatorsNamespace)); err != nil || len(plans.Items) > 0 {
			return fmt.Errorf("%d InstallPlans left (%w)", len(plans.Items), err)
		}
		return nil
	})
}

// A catalog whose head is reached from older versions only by its skipRange (the older
// bundle no longer published, no replaces edge) still upgrades an install of the older one;
// under manual approval, only once the upgrade's InstallPlan is approved.
func headWithOnlyASkipRange(t *testing.T, m *olm.OLM, imgs *olm.Images, tl *olm.Timeline) string {
	ctx := context.Background()
	previous, next := versions(t)
	publish(t, m, imgs, "v"+version(previous), readTemplate(t))
	_, err := m.Subscribe(ctx, olm.Subscription{Source: catalogSource, Channel: "stable", StartingCSV: previous, Manual: true})
	require.NoError(t, err)
	_, err = m.ApprovePlan(ctx, previous)
	require.NoError(t, err)
	waitInstalled(t, m, previous)

	skipOnly := readTemplate(t)
	require.NoError(t, skipOnly.Promote(next, "candidate", "stable"))
	require.NoError(t, skipOnly.OnlyHead("stable", next))
	published := tl.Mark("catalog with only " + next + " (skipRange) published")
	publish(t, m, imgs, "skip-only", skipOnly)
	plan, err := m.ApprovePlan(ctx, next)
	require.NoError(t, err)
	csvs := &operatorsv1alpha1.ClusterServiceVersionList{}
	require.NoError(t, m.Client().List(ctx, csvs, client.InNamespace(olm.OperatorsNamespace)))
	require.Len(t, csvs.Items, 1, "no upgrade before its InstallPlan is approved")
	require.Equal(t, previous, csvs.Items[0].Name)
	approved := tl.Mark("InstallPlan " + plan.Name + " approved")
	waitInstalled(t, m, next)
	at := succeededAt(t, tl, "CSV "+next)
	t.Logf("UPGRADE by skipRange %s -> %s: awaiting approval %.1fs after the catalog was published; Succeeded %.1fs after approval",
		previous, next, (approved - published).Seconds(), (at - approved).Seconds())
	requireGone(t, m, previous)
	return next
}

// A Subscription to candidate without a starting CSV installs the candidate head directly;
// with manual approval, nothing is installed until its InstallPlan is approved.
func subscriptionToCandidate(t *testing.T, m *olm.OLM, imgs *olm.Images, tl *olm.Timeline) string {
	ctx := context.Background()
	previous, next := versions(t)
	publish(t, m, imgs, "v"+version(previous), readTemplate(t))
	subscribed := tl.Mark("Subscription to candidate, manual approval")
	_, err := m.Subscribe(ctx, olm.Subscription{Source: catalogSource, Channel: "candidate", Manual: true})
	require.NoError(t, err)

	plan, err := m.ApprovePlan(ctx, next)
	require.NoError(t, err)
	csvs := &operatorsv1alpha1.ClusterServiceVersionList{}
	require.NoError(t, m.Client().List(ctx, csvs, client.InNamespace(olm.OperatorsNamespace)))
	require.Empty(t, csvs.Items, "nothing is installed before the InstallPlan is approved")
	require.Equal(t, []string{next}, plan.Spec.ClusterServiceVersionNames, "the head alone is planned")
	approved := tl.Mark("InstallPlan " + plan.Name + " approved")

	waitInstalled(t, m, next)
	at := succeededAt(t, tl, "CSV "+next)
	t.Logf("INSTALL candidate head %s: plan awaiting approval %.1fs after the Subscription; Succeeded %.1fs after approval",
		next, (approved - subscribed).Seconds(), (at - approved).Seconds())
	_, seen := tl.Seen("CSV "+previous, string(operatorsv1alpha1.CSVPhaseSucceeded))
	require.False(t, seen, "%s was never installed on the way", previous)
	return next
}

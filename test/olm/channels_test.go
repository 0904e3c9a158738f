package olm_test

import (
	"context"
	"os"
	"testing"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dolphin-operator/dolphin/test/olm"
)

// These tests are about the upgrade graph OLM walks: each gets a one-node ground of its
// own, since one cluster holds one install of the package; the operator's pod runs as
// OLM deploys it (a CSV succeeds only once its Deployment is available).

func startOLM(t *testing.T) (*olm.OLM, *olm.Images, *olm.Timeline) {
	t.Helper()
	g, imgs := startGround(t, 1)
	m := installOLM(t, g.Cluster, imgs)
	tl := m.Watch(olm.OperatorsNamespace, os.Stderr)
	t.Cleanup(tl.Stop)
	return m, imgs, tl
}

// A catalog whose head is reached from older versions only by its skipRange (the older
// bundle no longer published, no replaces edge) still upgrades an install of the older one;
// under manual approval, only once the upgrade's InstallPlan is approved.
func TestAHeadPublishedWithOnlyASkipRangeUpgradesAnOlderInstallOnceApproved(t *testing.T) {
	ctx := context.Background()
	previous, next := versions(t)
	m, imgs, tl := startOLM(t)
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
}

// A Subscription to candidate without a starting CSV installs the candidate head directly;
// with manual approval, nothing is installed until its InstallPlan is approved.
func TestASubscriptionToCandidateGetsTheCandidateHeadOnceApproved(t *testing.T) {
	ctx := context.Background()
	previous, next := versions(t)
	m, imgs, tl := startOLM(t)
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
}

package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// requireOperatorPasswordRotation asks for a rotation of the operator's passwords on a
// Ready cluster whose primary is primary: the instances restart onto the new passwords
// (replicas first, the primary last after one switchover), the old passwords are
// discarded, and then each rotated account is refused its old password and accepted with
// its new one on every instance, whose replication keeps running. It returns the primary
// afterwards.
func requireOperatorPasswordRotation(t *testing.T, ns, cluster string, names []string, primary string) string {
	t.Helper()
	ctx := context.Background()
	credentials := func() *corev1.Secret {
		s := &corev1.Secret{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster + "-credentials"}, s))
		return s
	}
	rememberCredentials(t, ns, cluster)
	before := credentials()
	start := time.Now()
	requireRollPrimaryLast(t, ns, cluster, names, primary, "the new passwords", func(c *mysqlv1beta1.MySQLCluster) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[mysqlv1beta1.AnnotationRotateOperatorPasswords] = "first"
	})
	var after *corev1.Secret
	took := waitFor(t, 3*time.Minute, "the old passwords discarded", func() error {
		after = credentials()
		if r := resources.CredentialsRotation(after); r.Phase != "" || after.Annotations[resources.AnnotationRotatedFor] != "first" {
			return fmt.Errorf("rotation %+v, rotated for %q", r, after.Annotations[resources.AnnotationRotatedFor])
		}
		return nil
	})
	t.Logf("rotation done %s after it was asked (%s after the roll)", time.Since(start).Round(time.Second), took.Round(time.Second))
	rememberCredentials(t, ns, cluster)
	for _, k := range []string{resources.KeyRootPassword, resources.KeyProbePassword} {
		require.Equal(t, before.Data[k], after.Data[k], "%s is not rotated", k)
	}
	for i, k := range resources.RotatedKeys {
		user := resources.RotatedAccounts[i]
		require.NotEqual(t, before.Data[k], after.Data[k], "%s has a new password", user)
		for _, pod := range names {
			require.NoError(t, ping(ctx, ns, cluster, pod, user, string(after.Data[k])), "%s's new password on %s", user, pod)
			require.ErrorContains(t, ping(ctx, ns, cluster, pod, user, string(before.Data[k])), "Error 1045",
				"%s's old password on %s", user, pod)
		}
	}
	events := &corev1.EventList{}
	require.NoError(t, k8s.List(ctx, events, client.InNamespace(ns)))
	var told []string
	for _, e := range events.Items {
		if e.Reason == mysqlv1beta1.ReasonPasswordRotation && e.InvolvedObject.Name == cluster {
			told = append(told, e.Message)
		}
	}
	t.Logf("rotation events: %q", told)
	require.Contains(t, told, "Rotation first of the operator's passwords is done: the old passwords are discarded")
	return currentPrimary(t, ns, cluster)
}

// ping logs in to an instance as user with password.
func ping(ctx context.Context, ns, cluster, pod, user, password string) error {
	d, err := g.AccountDBWithPassword(ctx, ns, cluster, pod, user, password)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return d.PingContext(ctx)
}

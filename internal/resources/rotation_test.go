package resources

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// A rotation of the operator's passwords, step by step: each step waits for the one before.
func TestTheOperatorsPasswordsRotateInPhases(t *testing.T) {
	c := cluster()
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	build := func(existing *corev1.Secret, p RotationProgress) *corev1.Secret {
		t.Helper()
		s, err := CredentialsSecret(c, existing, nil, p, now)
		require.NoError(t, err)
		return s
	}
	made := build(nil, RotationProgress{})
	require.Equal(t, Rotation{}, CredentialsRotation(made))

	// Asked: the new passwords are generated beside the current ones.
	c.Annotations = map[string]string{mysqlv1beta1.AnnotationRotateOperatorPasswords: "r1"}
	retaining := build(made, RotationProgress{})
	require.Equal(t, Rotation{Phase: RotationRetaining, Ask: "r1"}, CredentialsRotation(retaining))
	for _, k := range RotatedKeys {
		require.Equal(t, made.Data[k], retaining.Data[k], "%s stays current until every account accepts the new one", k)
		require.Len(t, retaining.Data[NextKey(k)], PasswordLength)
		require.NotEqual(t, made.Data[k], retaining.Data[NextKey(k)])
	}
	for _, k := range []string{KeyRootPassword, KeyProbePassword} {
		require.Equal(t, made.Data[k], retaining.Data[k], "%s is not rotated", k)
		require.NotContains(t, retaining.Data, NextKey(k))
	}
	again := build(retaining, RotationProgress{Retained: "r0"})
	require.Equal(t, retaining.Data, again.Data, "the new passwords are generated once; an older note is not this rotation's")

	// Retained on the primary: the Secret swaps them.
	rolling := build(retaining, RotationProgress{Retained: "r1"})
	require.Equal(t, Rotation{Phase: RotationRolling, Ask: "r1"}, CredentialsRotation(rolling))
	for _, k := range RotatedKeys {
		require.Equal(t, retaining.Data[NextKey(k)], rolling.Data[k])
		require.Equal(t, made.Data[k], rolling.Data[PreviousKey(k)])
		require.NotContains(t, rolling.Data, NextKey(k))
	}
	require.Equal(t, "2026-12-06T10:00:00Z", rolling.Annotations[AnnotationRotatedAt])
	require.Equal(t, now, PasswordsSetAt(rolling, nil, now.Add(time.Hour)))
	require.Equal(t, rolling.Data, build(rolling, RotationProgress{Retained: "r1"}).Data, "waits for the pods")

	// Every pod uses them: the discard is asked for; once done, the old passwords go.
	discarding := build(rolling, RotationProgress{Retained: "r1", ConsumersUpdated: true})
	require.Equal(t, Rotation{Phase: RotationDiscarding, Ask: "r1"}, CredentialsRotation(discarding))
	require.Equal(t, discarding.Data, build(discarding, RotationProgress{Retained: "r1", Discarded: "r0"}).Data)
	done := build(discarding, RotationProgress{Retained: "r1", Discarded: "r1"})
	require.Equal(t, Rotation{}, CredentialsRotation(done))
	for _, k := range RotatedKeys {
		require.Equal(t, rolling.Data[k], done.Data[k])
		require.NotContains(t, done.Data, PreviousKey(k))
	}
	require.Equal(t, map[string]string{AnnotationRotatedFor: "r1", AnnotationRotatedAt: "2026-12-06T10:00:00Z"}, done.Annotations)
	require.Equal(t, done.Data, build(done, RotationProgress{}).Data, "answered: the same ask starts nothing")

	// A new ask starts the next rotation.
	c.Annotations[mysqlv1beta1.AnnotationRotateOperatorPasswords] = "r2"
	require.Equal(t, Rotation{Phase: RotationRetaining, Ask: "r2"}, CredentialsRotation(build(done, RotationProgress{Retained: "r1"})))
}

func TestARotationAskedAtCreationIsAnswered(t *testing.T) {
	c := cluster()
	c.Annotations = map[string]string{mysqlv1beta1.AnnotationRotateOperatorPasswords: "r1"}
	s, err := CredentialsSecret(c, nil, nil, RotationProgress{}, time.Now())
	require.NoError(t, err)
	require.Equal(t, Rotation{}, CredentialsRotation(s))
	require.Equal(t, "r1", s.Annotations[AnnotationRotatedFor], "new passwords answer the ask")
	again, err := CredentialsSecret(c, s, nil, RotationProgress{}, time.Now())
	require.NoError(t, err)
	require.Equal(t, s.Data, again.Data)
	_, err = CredentialsSecret(c, s, bytes.NewReader(nil), RotationProgress{}, time.Now())
	require.NoError(t, err, "nothing to generate")
	c.Annotations[mysqlv1beta1.AnnotationRotateOperatorPasswords] = "r2"
	_, err = CredentialsSecret(c, s, bytes.NewReader(nil), RotationProgress{}, time.Now())
	require.Error(t, err, "a failing random source is an error, not a weak password")
}

func TestARotationRestartsThePodsOnce(t *testing.T) {
	c := cluster()
	before := StatefulSet(c, StatefulSetInput{ConfigHash: "h"})
	require.NotContains(t, before.Spec.Template.Annotations, AnnotationCredentials)
	after := StatefulSet(c, StatefulSetInput{ConfigHash: "h", Credentials: "r1"})
	require.Equal(t, "r1", after.Spec.Template.Annotations[AnnotationCredentials])
	require.NotEqual(t, before.Annotations[AnnotationPodInputs], after.Annotations[AnnotationPodInputs],
		"a rotation is a change of the pod inputs: the template is applied whatever the upgrade policy")
	require.Equal(t, PodInputsHash(c), before.Annotations[AnnotationPodInputs], "without one, as earlier releases wrote it")
}

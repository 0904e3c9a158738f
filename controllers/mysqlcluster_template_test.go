package controllers

import (
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

func TestHoldTemplate(t *testing.T) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"}}
	c.Spec.Instances = new(int32(3))
	c.Spec.MySQL.Version = "9.7"
	c.Default()
	images := func(mysql string) resources.Images {
		return resources.ImagesFromEnv(func(k string) string {
			if k == resources.EnvName("9.7") {
				return mysql
			}
			return ""
		})
	}
	build := func(c *mysqlv1beta1.MySQLCluster, mysql string) *appsv1.StatefulSet {
		return resources.StatefulSet(c, resources.StatefulSetInput{Images: images(mysql), ConfigHash: resources.ConfigHash(c)})
	}
	// live is what the API server holds of what an operator applied: its defaults filled in.
	live := func(s *appsv1.StatefulSet, change ...func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
		l := s.DeepCopy()
		for i := range l.Spec.Template.Spec.Containers {
			l.Spec.Template.Spec.Containers[i].ImagePullPolicy = corev1.PullIfNotPresent
			l.Spec.Template.Spec.Containers[i].TerminationMessagePath = "/dev/termination-log"
		}
		l.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		for _, f := range change {
			f(l)
		}
		return l
	}
	unrecorded := func(l *appsv1.StatefulSet) { l.Annotations = nil } // written by a release that recorded nothing
	resized := c.DeepCopy()
	resized.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
	extraEnv := func(l *appsv1.StatefulSet) {
		ctr := &l.Spec.Template.Spec.Containers[0]
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "OLD", Value: "1"})
		l.Annotations[resources.AnnotationPodTemplate] = "0123456789abcdef" // the old operator's template
	}
	cases := []struct {
		name    string
		desired *appsv1.StatefulSet
		live    *appsv1.StatefulSet
		policy  mysqlv1beta1.OperatorUpgradePolicy
		// keep: the live template is applied; changes: what PendingRestart names (held).
		keep    bool
		changes []string
	}{
		{"a new StatefulSet gets the built template", build(c, "mysql:9.7.4"), nil, "Hold", false, nil},
		{"the same operator, the same spec: the built template, as before", build(c, "mysql:9.7.4"), live(build(c, "mysql:9.7.4")), "Hold", false, nil},
		{"an operator with another default image holds the template and names the image",
			build(c, "mysql:9.7.5"), live(build(c, "mysql:9.7.4")), "Hold", true,
			[]string{"image of init container init: mysql:9.7.4 -> mysql:9.7.5", "image of container mysqld: mysql:9.7.4 -> mysql:9.7.5"}},
		{"with Roll, the built template is applied", build(c, "mysql:9.7.5"), live(build(c, "mysql:9.7.4")), "Roll", false, nil},
		{"a change of the spec's pod inputs applies the built template (the user asked for a restart)",
			build(resized, "mysql:9.7.5"), live(build(c, "mysql:9.7.4")), "Hold", false, nil},
		{"a template of a release that recorded nothing, equal where the built one sets fields: adopted, nothing pending",
			build(c, "mysql:9.7.4"), live(build(c, "mysql:9.7.4"), unrecorded), "Hold", true, nil},
		{"a template of a release that recorded nothing, with another image: adopted and held",
			build(c, "mysql:9.7.5"), live(build(c, "mysql:9.7.4"), unrecorded), "Hold", true,
			[]string{"image of init container init: mysql:9.7.4 -> mysql:9.7.5", "image of container mysqld: mysql:9.7.4 -> mysql:9.7.5"}},
		{"a template that cannot run under this operator (0.1.0's: no accounts) is replaced",
			build(c, "mysql:9.7.4"), live(build(c, "mysql:9.7.4"), unrecorded, func(l *appsv1.StatefulSet) {
				l.Spec.Template.Spec.InitContainers[0].Command = []string{"sh", "-c", "mysqld --initialize-insecure"}
			}), "Hold", false, nil},
		{"a field the new operator no longer sets is told by the recorded hash",
			build(c, "mysql:9.7.4"), live(build(c, "mysql:9.7.4"), extraEnv), "Hold", true, []string{"the pod template"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			built := tc.desired.Spec.Template.DeepCopy()
			inputs := tc.desired.Annotations[resources.AnnotationPodInputs]
			got := holdTemplate(tc.desired, tc.live, tc.policy)
			require.Equal(t, len(tc.changes) > 0, got.held)
			require.Equal(t, tc.changes, got.changes)
			require.Equal(t, inputs, tc.desired.Annotations[resources.AnnotationPodInputs], "the current inputs are recorded")
			if tc.keep {
				require.Equal(t, tc.live.Spec.Template, tc.desired.Spec.Template, "the live template is kept")
				require.Equal(t, tc.live.Annotations[resources.AnnotationPodTemplate], tc.desired.Annotations[resources.AnnotationPodTemplate],
					"the kept template's hash stays recorded")
			} else {
				require.Equal(t, *built, tc.desired.Spec.Template, "the built template is applied")
			}
		})
	}
}

// Every part of a container, and of the pod, is named when it differs.
func TestTemplateChangesNameWhatDiffers(t *testing.T) {
	ctr := corev1.Container{Name: "mysqld", Image: "a", Args: []string{"x"}, Env: []corev1.EnvVar{{Name: "A", Value: "1"}},
		ReadinessProbe: &corev1.Probe{PeriodSeconds: 2}}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{resources.AnnotationConfigHash: "h1"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{ctr}, Volumes: []corev1.Volume{{Name: "config"}}},
	}
	require.Empty(t, templateChanges(&tmpl, tmpl.DeepCopy()))
	next := tmpl.DeepCopy()
	next.Annotations[resources.AnnotationConfigHash] = "h2"
	next.Spec.Containers[0].Args = []string{"y"}
	next.Spec.Containers[0].ReadinessProbe.PeriodSeconds = 5
	next.Spec.Containers = append(next.Spec.Containers, corev1.Container{Name: "exporter"})
	next.Spec.Volumes = append(next.Spec.Volumes, corev1.Volume{Name: "tls"})
	next.Spec.EnableServiceLinks = new(false)
	require.Equal(t, []string{"command and arguments of container mysqld", "readiness probe of container mysqld",
		"container exporter added", "the volumes", "the my.cnf settings read at start", "the pod's settings"},
		templateChanges(next, &tmpl))
	require.Equal(t, []string{"command and arguments of container mysqld", "readiness probe of container mysqld",
		"container exporter removed", "the volumes", "the my.cnf settings read at start"}, templateChanges(&tmpl, next),
		"a pod setting removed is not seen by comparing what the built template sets")
}

// The webhook's change checks hold in the reconciler too, against what runs: a spec that
// reached the API server around the webhook is not applied.
func TestRefusedChanges(t *testing.T) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"}}
	c.Spec.Instances = new(int32(3))
	c.Spec.MySQL.Version = "9.7"
	c.Default()
	c.Status.Version = "9.7.4"
	sts := func(image string, replicas int32) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{}
		s.Spec.Replicas = &replicas
		s.Spec.Template.Spec.Containers = []corev1.Container{{Name: resources.ContainerMySQL, Image: image}}
		return s
	}
	require.Empty(t, refusedChanges(c, sts("mysql:9.7.3", 3), nil), "a new cluster has nothing running")
	require.Empty(t, refusedChanges(c, sts("mysql:9.7.3", 3), sts("mysql:9.7.3", 3)), "what runs already is no change")
	require.Empty(t, refusedChanges(c, sts("mysql:9.7.5", 3), sts("mysql:9.7.4", 3)), "an upgrade")
	errs := refusedChanges(c, sts("mysql:9.7.3", 3), sts("mysql:9.7.4", 3))
	require.Len(t, errs, 1)
	require.Equal(t, "spec.mysql.version", errs[0].Field)
	require.Contains(t, errs[0].Detail, "older than the 9.7.4 the instances run")

	two := c.DeepCopy()
	two.Spec.Instances = new(int32(2))
	require.Empty(t, refusedChanges(two, sts("mysql:9.7.4", 2), sts("mysql:9.7.4", 3)), "two instances keep one semi-sync replica")
	two.Spec.Replication.SemiSync.WaitForReplicaCount = new(int32(2))
	errs = refusedChanges(two, sts("mysql:9.7.4", 2), sts("mysql:9.7.4", 3))
	require.Len(t, errs, 1)
	require.Equal(t, "spec.instances", errs[0].Field)
}

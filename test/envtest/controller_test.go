package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/controllers"
	"github.com/dolphin-operator/dolphin/internal/resources"
	webhookv1beta1 "github.com/dolphin-operator/dolphin/internal/webhook/v1beta1"
	"github.com/dolphin-operator/dolphin/test/envtest"
)

// controllerEnv runs the API server, the webhooks and the MySQLCluster controller, whose
// client counts every write it makes.
func controllerEnv(t testing.TB) (*envtest.Env, *controllers.MySQLClusterReconciler, *envtest.CountingClient) {
	var rec *controllers.MySQLClusterReconciler
	var counting *envtest.CountingClient
	env := envtest.Start(t, envtest.Options{Webhooks: true, Setup: func(mgr ctrl.Manager) error {
		counting = envtest.NewCountingClient(mgr.GetClient())
		rec = &controllers.MySQLClusterReconciler{Client: counting, Scheme: mgr.GetScheme(),
			Recorder:          mgr.GetEventRecorder("dolphin-operator"),
			Images:            resources.ImagesFromEnv(func(string) string { return "" }),
			OperatorNamespace: "dolphin-system"}
		return rec.SetupWithManager(mgr)
	}}, func(mgr ctrl.Manager) error {
		if err := webhookv1beta1.SetupMySQLClusterWebhookWithManager(mgr, resources.ImagesFromEnv(func(string) string { return "" })); err != nil {
			return err
		}
		return webhookv1beta1.SetupMySQLBackupWebhookWithManager(mgr)
	})
	return env, rec, counting
}

func eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s: %v", what, err)
}

func get[T client.Object](ctx context.Context, c client.Client, ns, name string, obj T) (T, error) {
	return obj, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
}

func TestClusterControllerAgainstARealAPIServer(t *testing.T) {
	env, rec, counting := controllerEnv(t)
	c := env.Client
	ctx := context.Background()
	ns := namespace(t, c)
	cl := v1beta1Cluster(ns, "db")
	cl.Spec.Backup = &mysqlv1beta1.BackupSpec{Schedule: "0 3 1 1 *"} // due once a year: no backup during the test
	cl.Spec.DeletionPolicy = mysqlv1beta1.DeletionPolicyRetain
	require.NoError(t, c.Create(ctx, cl))

	t.Run("every child is created with the cluster as its controller", func(t *testing.T) {
		children := map[string]client.Object{
			"db": &appsv1.StatefulSet{}, "db-instances": &corev1.Service{}, "db-primary": &corev1.Service{},
			"db-replicas": &corev1.Service{}, "db-config": &corev1.ConfigMap{}, "db-credentials": &corev1.Secret{},
			"db-ca": &corev1.Secret{}, "db-tls": &corev1.Secret{},
		}
		children["db "] = &policyv1.PodDisruptionBudget{}         // same name as the StatefulSet
		children["db-instances "] = &networkingv1.NetworkPolicy{} // same name as the headless Service
		for name, obj := range children {
			eventually(t, name, func() error {
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: trim(name)}, obj); err != nil {
					return err
				}
				if ref := metav1.GetControllerOf(obj); ref == nil || ref.Kind != "MySQLCluster" || ref.Name != "db" {
					return fmt.Errorf("%T %s is not controlled by the cluster: %v", obj, name, obj.GetOwnerReferences())
				}
				return nil
			})
		}
		claim := &corev1.PersistentVolumeClaim{}
		eventually(t, "the backup volume", func() error { return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-backup"}, claim) })
		sts, err := get(ctx, c, ns, "db", &appsv1.StatefulSet{})
		require.NoError(t, err)
		require.Equal(t, int32(3), *sts.Spec.Replicas)
		require.NotEmpty(t, sts.Spec.Template.Annotations[resources.AnnotationConfigHash])
		got, err := get(ctx, c, ns, "db", &mysqlv1beta1.MySQLCluster{})
		require.NoError(t, err)
		require.Contains(t, got.Finalizers, mysqlv1beta1.ClusterFinalizer, "the reconciler adds its finalizer itself")
		eventually(t, "a status for the current generation", func() error {
			got, err := get(ctx, c, ns, "db", &mysqlv1beta1.MySQLCluster{})
			if err != nil {
				return err
			}
			ready := meta.FindStatusCondition(got.Status.Conditions, mysqlv1beta1.ConditionReady)
			if got.Status.ObservedGeneration != got.Generation || ready == nil {
				return fmt.Errorf("status %+v", got.Status)
			}
			if ready.Status != metav1.ConditionFalse || got.Status.Phase != mysqlv1beta1.PhaseProvisioning {
				return fmt.Errorf("no pod runs here (no controller-manager), so the cluster is not ready: %+v", got.Status)
			}
			return nil
		})
	})

	t.Run("the instances' NetworkPolicy admits the operator, the cluster's pods and its namespace, and goes when disabled", func(t *testing.T) {
		np, err := get(ctx, c, ns, "db-instances", &networkingv1.NetworkPolicy{})
		require.NoError(t, err)
		require.Equal(t, map[string]string{resources.LabelName: "mysql", resources.LabelInstance: "db",
			resources.LabelManagedBy: resources.ManagedBy}, np.Spec.PodSelector.MatchLabels)
		require.Len(t, np.Spec.Ingress, 2)
		from := np.Spec.Ingress[0].From
		require.Equal(t, int32(resources.MySQLPort), np.Spec.Ingress[0].Ports[0].Port.IntVal)
		require.Len(t, from, 3)
		require.Equal(t, "dolphin-system", from[1].NamespaceSelector.MatchLabels[corev1.LabelMetadataName], "the operator's namespace")
		require.Equal(t, resources.OperatorPodLabels, from[1].PodSelector.MatchLabels)
		require.Empty(t, from[2].PodSelector.MatchLabels, "every pod of the cluster's namespace, by default")
		require.Nil(t, from[2].NamespaceSelector)
		require.Empty(t, np.Spec.Ingress[1].From, "the exporter's port admits anyone by default")

		got, err := get(ctx, c, ns, "db", &mysqlv1beta1.MySQLCluster{})
		require.NoError(t, err)
		require.True(t, *got.Spec.NetworkPolicy.Enabled, "defaulted")
		got.Spec.NetworkPolicy.Enabled = new(false)
		require.NoError(t, c.Update(ctx, got))
		eventually(t, "the NetworkPolicy deleted", func() error {
			if _, err := get(ctx, c, ns, "db-instances", &networkingv1.NetworkPolicy{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %w", err)
			}
			return nil
		})
		got, err = get(ctx, c, ns, "db", &mysqlv1beta1.MySQLCluster{})
		require.NoError(t, err)
		got.Spec.NetworkPolicy.Enabled = new(true)
		require.NoError(t, c.Update(ctx, got))
		eventually(t, "the NetworkPolicy made again", func() error {
			_, err := get(ctx, c, ns, "db-instances", &networkingv1.NetworkPolicy{})
			return err
		})
	})

	t.Run("a settled cluster is reconciled with zero writes", func(t *testing.T) {
		settle(t, counting)
		counting.Reset()
		res, err := rec.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "db"}})
		require.NoError(t, err)
		require.Empty(t, counting.Writes(), "a second reconcile of an unchanged cluster must not write")
		require.Positive(t, res.RequeueAfter, "the next certificate renewal is scheduled")
	})

	t.Run("a settled cluster's passes send no discovery request", func(t *testing.T) {
		// The API server has no monitoring.coreos.com group: every pass asks whether the
		// ServiceMonitor and PrometheusRule kinds are served, and a REST mapper asked for a
		// kind it lacks reads discovery again each time, unless the answer is remembered.
		env.Requests.Reset()
		for range 20 {
			_, err := rec.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "db"}})
			require.NoError(t, err)
		}
		all, discovery := env.Requests.Counts()
		require.Empty(t, discovery, "discovery requests in 20 settled passes")
		t.Logf("20 settled passes: %d API requests, %d of them discovery", all, len(discovery))
	})

	t.Run("changes converge on the children", func(t *testing.T) {
		before, err := get(ctx, c, ns, "db", &appsv1.StatefulSet{})
		require.NoError(t, err)
		update(t, c, ns, func(x *mysqlv1beta1.MySQLCluster) {
			x.Spec.Instances = new(int32(5))
			x.Spec.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}
			// back_log is read at start only (it changes the pod template's hash);
			// max_connections is an online setting, in my.cnf too.
			x.Spec.MySQL.Config = map[string]string{"max_connections": "777", "back_log": "77"}
		})
		eventually(t, "the StatefulSet to follow", func() error {
			sts, err := get(ctx, c, ns, "db", &appsv1.StatefulSet{})
			if err != nil {
				return err
			}
			m := sts.Spec.Template.Spec.Containers[0]
			if *sts.Spec.Replicas != 5 || m.Resources.Requests.Memory().String() != "2Gi" ||
				sts.Spec.Template.Annotations[resources.AnnotationConfigHash] == before.Spec.Template.Annotations[resources.AnnotationConfigHash] {
				return fmt.Errorf("replicas %d, resources %v, hash %s", *sts.Spec.Replicas, m.Resources, sts.Spec.Template.Annotations)
			}
			return nil
		})
		cm, err := get(ctx, c, ns, "db-config", &corev1.ConfigMap{})
		require.NoError(t, err)
		require.Contains(t, cm.Data[resources.ConfigFileKey], "max_connections = 777")
		require.Contains(t, cm.Data[resources.ConfigFileKey], "back_log = 77")
	})

	t.Run("an earlier release's backup CronJob is deleted; removing the schedule keeps the backups' volume", func(t *testing.T) {
		got, err := get(ctx, c, ns, "db", &mysqlv1beta1.MySQLCluster{})
		require.NoError(t, err)
		cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-backup",
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(got, mysqlv1beta1.GroupVersion.WithKind("MySQLCluster"))}},
			Spec: batchv1.CronJobSpec{Schedule: "0 2 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "backup", Image: "mysql"}}}}}}}}
		require.NoError(t, c.Create(ctx, cj))
		update(t, c, ns, func(x *mysqlv1beta1.MySQLCluster) { x.Spec.Backup = nil })
		eventually(t, "the CronJob to go", func() error {
			if _, err := get(ctx, c, ns, "db-backup", &batchv1.CronJob{}); !apierrors.IsNotFound(err) {
				return stillThere(err)
			}
			return nil
		})
		_, err = get(ctx, c, ns, "db-backup", &corev1.PersistentVolumeClaim{})
		require.NoError(t, err)
	})

	t.Run("one instance needs no disruption budget", func(t *testing.T) {
		update(t, c, ns, func(x *mysqlv1beta1.MySQLCluster) { x.Spec.Instances = new(int32(1)) })
		eventually(t, "the budget to go", func() error {
			if _, err := get(ctx, c, ns, "db", &policyv1.PodDisruptionBudget{}); !apierrors.IsNotFound(err) {
				return stillThere(err)
			}
			return nil
		})
	})

	t.Run("a child changed by hand is put back", func(t *testing.T) {
		svc, err := get(ctx, c, ns, "db-primary", &corev1.Service{})
		require.NoError(t, err)
		svc.Spec.Selector[resources.LabelRole] = "anything"
		require.NoError(t, c.Update(ctx, svc))
		eventually(t, "the selector to be restored", func() error {
			svc, err := get(ctx, c, ns, "db-primary", &corev1.Service{})
			if err != nil {
				return err
			}
			if svc.Spec.Selector[resources.LabelRole] != string(resources.RolePrimary) {
				return fmt.Errorf("selector %v", svc.Spec.Selector)
			}
			return nil
		})
	})

	t.Run("a template an earlier operator built is kept until the update policy says Roll", func(t *testing.T) {
		// What an earlier operator with another default image left: its image, its hash.
		sts, err := get(ctx, c, ns, "db", &appsv1.StatefulSet{})
		require.NoError(t, err)
		built := sts.Spec.Template.Spec.Containers[0].Image
		sts.Spec.Template.Spec.Containers[0].Image = "registry.example.com/mysql:8.4.5"
		sts.Annotations[resources.AnnotationPodTemplate] = "0123456789abcdef"
		require.NoError(t, c.Update(ctx, sts))
		eventually(t, "PendingRestart to name the image a restart would bring", func() error {
			got, err := get(ctx, c, ns, "db", &mysqlv1beta1.MySQLCluster{})
			if err != nil {
				return err
			}
			p := meta.FindStatusCondition(got.Status.Conditions, mysqlv1beta1.ConditionPendingRestart)
			if p == nil || p.Status != metav1.ConditionTrue ||
				!strings.Contains(p.Message, "image of container mysqld: registry.example.com/mysql:8.4.5 -> "+built) {
				return fmt.Errorf("PendingRestart %+v", p)
			}
			return nil
		})
		settle(t, counting)
		held, err := get(ctx, c, ns, "db", &appsv1.StatefulSet{})
		require.NoError(t, err)
		require.Equal(t, "registry.example.com/mysql:8.4.5", held.Spec.Template.Spec.Containers[0].Image, "the template is kept")
		require.Equal(t, sts.Generation, held.Generation, "and not written again")

		update(t, c, ns, func(x *mysqlv1beta1.MySQLCluster) {
			x.Spec.UpdatePolicy.OperatorUpgrade = mysqlv1beta1.OperatorUpgradeRoll
		})
		eventually(t, "the built template, and nothing pending", func() error {
			sts, err := get(ctx, c, ns, "db", &appsv1.StatefulSet{})
			if err != nil {
				return err
			}
			got, err := get(ctx, c, ns, "db", &mysqlv1beta1.MySQLCluster{})
			if err != nil {
				return err
			}
			if img := sts.Spec.Template.Spec.Containers[0].Image; img != built ||
				!meta.IsStatusConditionFalse(got.Status.Conditions, mysqlv1beta1.ConditionPendingRestart) {
				return fmt.Errorf("image %s, conditions %v", img, got.Status.Conditions)
			}
			return nil
		})
	})

	t.Run("a volume whose StorageClass does not allow expansion keeps its size, and Degraded says why", func(t *testing.T) {
		require.NoError(t, c.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fixed"},
			Provisioner: "example.com/fixed", AllowVolumeExpansion: new(false)}))
		sts, err := get(ctx, c, ns, "db", &appsv1.StatefulSet{})
		require.NoError(t, err)
		cl, err := get(ctx, c, ns, "db", &mysqlv1beta1.MySQLCluster{})
		require.NoError(t, err)
		claim := dataClaim(ns, "data-db-1", cl, sts)
		claim.OwnerReferences = nil
		claim.Spec.StorageClassName = new("fixed")
		require.NoError(t, c.Create(ctx, claim))
		update(t, c, ns, func(x *mysqlv1beta1.MySQLCluster) {
			x.Spec.Instances = new(int32(2)) // the claims of instances spec.instances keeps grow
			x.Spec.Storage.Size = new(resource.MustParse("50Gi"))
		})
		eventually(t, "Degraded to name the StorageClass", func() error {
			got, err := get(ctx, c, ns, "db", &mysqlv1beta1.MySQLCluster{})
			if err != nil {
				return err
			}
			d := meta.FindStatusCondition(got.Status.Conditions, mysqlv1beta1.ConditionDegraded)
			if d == nil || d.Reason != mysqlv1beta1.ReasonVolumeExpansionRefused ||
				!strings.Contains(d.Message, "data-db-1's StorageClass fixed does not allow volume expansion") {
				return fmt.Errorf("Degraded %+v", d)
			}
			return nil
		})
		got, err := get(ctx, c, ns, "data-db-1", &corev1.PersistentVolumeClaim{})
		require.NoError(t, err)
		require.Equal(t, "1Gi", got.Spec.Resources.Requests.Storage().String(), "no resize is asked of the claim")
	})

	t.Run("deletion right after a switch to Retain keeps the data volumes and the secrets", func(t *testing.T) {
		// The StatefulSet still says Delete, as it does when the cluster is deleted before the
		// operator has applied the new policy; the claim still belongs to it.
		sts, err := get(ctx, c, ns, "db", &appsv1.StatefulSet{})
		require.NoError(t, err)
		stale := client.MergeFrom(sts.DeepCopy())
		sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
		require.NoError(t, c.Patch(ctx, sts, stale))
		claim := dataClaim(ns, "data-db-0", cl, sts)
		require.NoError(t, c.Create(ctx, claim))
		require.NoError(t, c.Delete(ctx, cl))

		eventually(t, "the StatefulSet's claim policy to be Retain", func() error {
			sts, err := get(ctx, c, ns, "db", &appsv1.StatefulSet{})
			if err != nil {
				return err
			}
			if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
				return fmt.Errorf("whenDeleted %s", p.WhenDeleted)
			}
			return nil
		})
		// envtest runs no StatefulSet controller: until the policy is observed the cluster stays.
		time.Sleep(2 * time.Second)
		held, err := get(ctx, c, ns, "db", &mysqlv1beta1.MySQLCluster{})
		require.NoError(t, err, "the cluster must wait for the StatefulSet controller to observe Retain")
		require.NotNil(t, held.DeletionTimestamp)

		// Play the StatefulSet controller: it observes the generation.
		sts, err = get(ctx, c, ns, "db", &appsv1.StatefulSet{})
		require.NoError(t, err)
		observed := client.MergeFrom(sts.DeepCopy())
		sts.Status.ObservedGeneration = sts.Generation
		require.NoError(t, c.Status().Patch(ctx, sts, observed))

		eventually(t, "the cluster to be gone", func() error {
			if _, err := get(ctx, c, ns, "db", &mysqlv1beta1.MySQLCluster{}); !apierrors.IsNotFound(err) {
				return stillThere(err)
			}
			return nil
		})
		got, err := get(ctx, c, ns, "data-db-0", &corev1.PersistentVolumeClaim{})
		require.NoError(t, err)
		require.Empty(t, got.OwnerReferences, "a retained data volume must not be garbage-collected with the StatefulSet")
		s, err := get(ctx, c, ns, "db-credentials", &corev1.Secret{})
		require.NoError(t, err)
		require.Empty(t, s.OwnerReferences, "a retained Secret must not be garbage-collected with the cluster")
		sts, err = get(ctx, c, ns, "db", &appsv1.StatefulSet{})
		require.NoError(t, err, "envtest has no garbage collector: owned children stay until one runs")
		require.NotEmpty(t, sts.OwnerReferences)
	})
}

// dataClaim is an instance's data volume as the StatefulSet controller creates it: the
// pods' labels and, under a Delete claim policy, an owner reference to the StatefulSet.
func dataClaim(ns, name string, cl *mysqlv1beta1.MySQLCluster, sts *appsv1.StatefulSet) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: resources.SelectorLabels(cl),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet",
				Name: sts.Name, UID: sts.UID}}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

func trim(s string) string {
	for len(s) > 0 && s[len(s)-1] == ' ' {
		s = s[:len(s)-1]
	}
	return s
}

// update changes the stored cluster, retrying on conflicts with the controller.
func update(t *testing.T, c client.Client, ns string, mutate func(*mysqlv1beta1.MySQLCluster)) {
	t.Helper()
	eventually(t, "an update", func() error {
		x, err := get(context.Background(), c, ns, "db", &mysqlv1beta1.MySQLCluster{})
		if err != nil {
			return err
		}
		mutate(x)
		return c.Update(context.Background(), x)
	})
}

// settle waits until the controller has made no write for two seconds.
func settle(t testing.TB, counting *envtest.CountingClient) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		counting.Reset()
		time.Sleep(2 * time.Second)
		if len(counting.Writes()) == 0 {
			return
		}
	}
	t.Fatalf("the controller kept writing: %v", counting.Writes())
}

// stillThere explains why an object expected gone is not: it exists (err nil) or could
// not be read.
func stillThere(err error) error {
	if err == nil {
		return fmt.Errorf("still there")
	}
	return fmt.Errorf("could not tell whether it is gone: %w", err)
}

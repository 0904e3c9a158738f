package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// A change the pods are not built from leaves the inputs' hash and the template as they
// were; a change they are built from changes both, except online settings (set on the
// running instances), which change neither.
func TestPodInputsAreWhatThePodTemplateIsBuiltFrom(t *testing.T) {
	img := ImagesFromEnv(func(string) string { return "" })
	build := func(c *mysqlv1beta1.MySQLCluster) (string, string) {
		s := StatefulSet(c, StatefulSetInput{Images: img, ConfigHash: ConfigHash(c)})
		if s.Annotations[AnnotationPodInputs] != PodInputsHash(c) || s.Annotations[AnnotationPodTemplate] != TemplateHash(&s.Spec.Template) {
			t.Fatalf("the StatefulSet's annotations are not its inputs' and template's hashes: %v", s.Annotations)
		}
		return PodInputsHash(c), TemplateHash(&s.Spec.Template)
	}
	baseInputs, baseTemplate := build(cluster())
	same := map[string]func(*mysqlv1beta1.MySQLCluster){
		"instances":         func(c *mysqlv1beta1.MySQLCluster) { c.Spec.Instances = new(int32(5)) },
		"primary":           func(c *mysqlv1beta1.MySQLCluster) { c.Spec.Primary = "db-2" },
		"semi-sync":         func(c *mysqlv1beta1.MySQLCluster) { c.Spec.Replication.SemiSync.WaitForReplicaCount = new(int32(2)) },
		"backups":           func(c *mysqlv1beta1.MySQLCluster) { c.Spec.Backup = &mysqlv1beta1.BackupSpec{Schedule: "@daily"} },
		"an online setting": func(c *mysqlv1beta1.MySQLCluster) { c.Spec.MySQL.Config = map[string]string{"max_connections": "500"} },
		"the update policy": func(c *mysqlv1beta1.MySQLCluster) {
			c.Spec.UpdatePolicy.OperatorUpgrade = mysqlv1beta1.OperatorUpgradeRoll
		},
		"labels":       func(c *mysqlv1beta1.MySQLCluster) { c.Labels = map[string]string{"team": "a"} },
		"storage size": func(c *mysqlv1beta1.MySQLCluster) { c.Spec.Storage.Size = new(resource.MustParse("20Gi")) },
	}
	for name, m := range same {
		if i, tmpl := build(cluster(m)); i != baseInputs || tmpl != baseTemplate {
			t.Errorf("%s changed the pod inputs (%t) or the template (%t)", name, i != baseInputs, tmpl != baseTemplate)
		}
	}
	differ := map[string]func(*mysqlv1beta1.MySQLCluster){
		"the version":             func(c *mysqlv1beta1.MySQLCluster) { c.Spec.MySQL.Version = "9.7" },
		"the image":               func(c *mysqlv1beta1.MySQLCluster) { c.Spec.MySQL.Image = "example.com/mysql:9.7.4" },
		"a setting read at start": func(c *mysqlv1beta1.MySQLCluster) { c.Spec.MySQL.Config = map[string]string{"back_log": "9"} },
		"resources": func(c *mysqlv1beta1.MySQLCluster) {
			c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
		},
		"TLS":          func(c *mysqlv1beta1.MySQLCluster) { c.Spec.TLS.Enabled = new(false) },
		"the exporter": func(c *mysqlv1beta1.MySQLCluster) { c.Spec.Monitoring.Exporter.Enabled = true },
		"a pod annotation": func(c *mysqlv1beta1.MySQLCluster) {
			c.Spec.PodTemplate.Metadata.Annotations = map[string]string{"restartedAt": "now"}
		},
		"the name": func(c *mysqlv1beta1.MySQLCluster) { c.ObjectMeta = metav1.ObjectMeta{Name: "other", Namespace: "prod"} },
	}
	for name, m := range differ {
		if i, tmpl := build(cluster(m)); i == baseInputs || tmpl == baseTemplate {
			t.Errorf("%s left the pod inputs (%t) or the template (%t) as they were", name, i == baseInputs, tmpl == baseTemplate)
		}
	}
}

// The operator's own defaults are not inputs: another default image changes the template
// and not the inputs, which is how an operator upgrade is told apart from a user's change.
func TestAnotherDefaultImageChangesTheTemplateNotTheInputs(t *testing.T) {
	c := cluster(func(c *mysqlv1beta1.MySQLCluster) { c.Spec.MySQL.Version = "9.7" })
	old := ImagesFromEnv(func(string) string { return "" })
	next := ImagesFromEnv(func(k string) string {
		if k == EnvName("9.7") {
			return "registry.example.com/mysql:9.7.5"
		}
		return ""
	})
	a := StatefulSet(c, StatefulSetInput{Images: old, ConfigHash: ConfigHash(c)})
	b := StatefulSet(c, StatefulSetInput{Images: next, ConfigHash: ConfigHash(c)})
	if a.Annotations[AnnotationPodInputs] != b.Annotations[AnnotationPodInputs] {
		t.Error("the operator's default image is not one of the cluster's inputs")
	}
	if a.Annotations[AnnotationPodTemplate] == b.Annotations[AnnotationPodTemplate] {
		t.Error("another image must change the template's hash")
	}
}

// spec.application's database reaches the init container (which grants the users account
// on it) and so changes the template; it is not one of the inputs' hash, being set only at
// creation (an earlier release's clusters keep their inputs' hash).
func TestTheApplicationDatabaseReachesTheInitContainer(t *testing.T) {
	img := ImagesFromEnv(func(string) string { return "" })
	plain := cluster()
	withApp := cluster(func(c *mysqlv1beta1.MySQLCluster) {
		c.Spec.Application = &mysqlv1beta1.ApplicationSpec{Database: "shop", User: "shop"}
	})
	a := StatefulSet(plain, StatefulSetInput{Images: img, ConfigHash: ConfigHash(plain)})
	b := StatefulSet(withApp, StatefulSetInput{Images: img, ConfigHash: ConfigHash(withApp)})
	database := func(s *corev1.PodTemplateSpec) string {
		for _, ic := range s.Spec.InitContainers {
			for _, e := range ic.Env {
				if e.Name == ApplicationDatabaseVar {
					return e.Value
				}
			}
		}
		return ""
	}
	if got := database(&b.Spec.Template); got != "shop" {
		t.Errorf("the init container's %s = %q, want shop", ApplicationDatabaseVar, got)
	}
	if got := database(&a.Spec.Template); got != "" {
		t.Errorf("without spec.application the init container has %s = %q", ApplicationDatabaseVar, got)
	}
	if a.Annotations[AnnotationPodInputs] != b.Annotations[AnnotationPodInputs] {
		t.Error("the application's database changed the inputs' hash")
	}
	if a.Annotations[AnnotationPodTemplate] == b.Annotations[AnnotationPodTemplate] {
		t.Error("the application's database left the template as it was")
	}
}

package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// Annotations on the StatefulSet (never on its pod template: a change there is itself a
// new revision, which the roll restarts every pod onto).
const (
	// AnnotationPodInputs is PodInputsHash of the cluster the StatefulSet's pod template
	// was built for.
	AnnotationPodInputs = "mysql.dolphin-operator.io/pod-inputs"
	// AnnotationPodTemplate is TemplateHash of the pod template as the operator built it,
	// before the API server filled in its defaults ("" when unknown: a template kept from
	// a release that did not record it).
	AnnotationPodTemplate = "mysql.dolphin-operator.io/pod-template"
)

// PodInputs is the part of a cluster its instances' pods are built from: its name, the
// MySQL version and image, the my.cnf settings read at start (the online ones are set on
// the running instances and restart nothing), resources, TLS, the exporter, the user's
// pod template additions and spec.application's database (the init container grants on it). The pod template and the ConfigHash are built from this view
// alone, so a change of any other field (instances, primary, backups, replication) can
// never change the template, and PodInputsHash tells a change of the user's inputs apart
// from a change of the operator's own defaults (images, probes, scripts), which an
// operator upgrade brings.
func PodInputs(c *mysqlv1beta1.MySQLCluster) *mysqlv1beta1.MySQLCluster {
	v := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace}}
	s := &v.Spec
	s.MySQL.Version, s.MySQL.Image = c.Spec.MySQL.Version, c.Spec.MySQL.Image
	for k, val := range c.Spec.MySQL.Config {
		if _, online := mysqlv1beta1.OnlineSettings[mysqlv1beta1.SettingName(k)]; !online {
			if s.MySQL.Config == nil {
				s.MySQL.Config = map[string]string{}
			}
			s.MySQL.Config[k] = val
		}
	}
	s.Resources = *c.Spec.Resources.DeepCopy()
	s.TLS = *c.Spec.TLS.DeepCopy()
	s.Monitoring.Exporter = *c.Spec.Monitoring.Exporter.DeepCopy()
	s.PodTemplate = *c.Spec.PodTemplate.DeepCopy()
	if a := c.Spec.Application; a != nil {
		s.Application = &mysqlv1beta1.ApplicationSpec{Database: a.Database}
	}
	return v
}

// PodInputsHash is a short digest of PodInputs: equal for two specs whose pods the same
// operator builds alike.
func PodInputsHash(c *mysqlv1beta1.MySQLCluster) string {
	v := PodInputs(c)
	// The application's database is left out: set at creation and immutable, it is never a
	// user's change, and an earlier release that did not put it in the template must not
	// see its clusters' inputs as changed.
	v.Spec.Application = nil
	return shortHash(struct {
		Name, Namespace string
		Spec            mysqlv1beta1.MySQLClusterSpec
	}{v.Name, v.Namespace, v.Spec})
}

// Keepable reports whether a pod template an earlier operator built can keep running under
// this one: its init container gives a data folder the operator's accounts (initScript's
// accountsMarker), without which the operator cannot manage replication. Dolphin 0.1.0's
// templates do not, and must be replaced.
func Keepable(t *corev1.PodTemplateSpec) bool {
	for _, c := range t.Spec.InitContainers {
		if strings.Contains(strings.Join(append(slices.Clone(c.Command), c.Args...), " "), accountsMarker) {
			return true
		}
	}
	return false
}

// TemplateHash is a short digest of a pod template as the operator built it.
func TemplateHash(t *corev1.PodTemplateSpec) string { return shortHash(t) }

// shortHash digests v's JSON form (maps in it are written with sorted keys).
func shortHash(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		panic("resources: a Kubernetes type did not marshal: " + err.Error()) // cannot happen for API types
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])[:16]
}

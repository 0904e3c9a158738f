package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/pki"
	webhookv1beta1 "github.com/dolphin-operator/dolphin/internal/webhook/v1beta1"
)

// operator is one program under measurement: where its CRDs and RBAC come from, how it
// is started, and what one cluster of the workload is for it.
type operator struct {
	// name is what the result lines call it (dolphin, moco, moco-qps500).
	name string
	// namespace is its own (leader election, moco's controller Secrets).
	namespace string
	// bin is the program; crds the manifests installed before it starts; rbac its
	// ClusterRole and leader-election Role, bound to its own user.
	bin        string
	crds, rbac []string
	// gvr is the resource the workload creates.
	gvr schema.GroupVersionResource
	// args and env start it; prepare writes what it needs on disk (certificates) into dir.
	args    func(dir string) []string
	env     []string
	prepare func(dir string) error
	// cluster is the i-th workload object (as its operator's mutating webhook would admit it:
	// no webhook runs).
	cluster func(namespace, name string, i int) (*unstructured.Unstructured, error)
	// workqueue is the controller name of its cluster reconciler in controller-runtime's
	// workqueue and reconcile metrics.
	workqueue string
}

// Ports the operators' endpoints listen on (loopback: nothing else in the namespace uses them).
const (
	metricsAddr = "127.0.0.1:18080"
	probeAddr   = "127.0.0.1:18081"
	webhookAddr = "127.0.0.1:19443"
	pprofAddr   = "127.0.0.1:18082"
)

// dolphin runs this checkout's manager as its Deployment would, minus the webhook server
// (nothing calls it here; the workload is defaulted by the same code the webhook runs).
func dolphin(root, bin string) operator {
	ns := "dolphin-system"
	return operator{
		name: "dolphin", namespace: ns, bin: bin,
		crds: []string{filepath.Join(root, "config/crd/bases")},
		rbac: []string{filepath.Join(root, "config/rbac/role.yaml"), filepath.Join(root, "config/rbac/leader_election_role.yaml")},
		gvr:  mysqlv1beta1.GroupVersion.WithResource("mysqlclusters"),
		args: func(string) []string {
			return []string{"--leader-elect", "--leader-election-namespace=" + ns,
				"--metrics-bind-address=" + metricsAddr, "--metrics-secure=false",
				"--health-probe-bind-address=" + probeAddr, "--pprof-bind-address=" + pprofAddr}
		},
		env:       []string{"ENABLE_WEBHOOKS=false", "POD_NAMESPACE=" + ns},
		prepare:   func(string) error { return nil },
		cluster:   dolphinCluster,
		workqueue: "mysqlcluster",
	}
}

func dolphinCluster(namespace, name string, _ int) (*unstructured.Unstructured, error) {
	c := &mysqlv1beta1.MySQLCluster{}
	c.APIVersion, c.Kind = mysqlv1beta1.GroupVersion.String(), "MySQLCluster"
	c.Namespace, c.Name = namespace, name
	three := int32(3)
	c.Spec.Instances = &three
	c.Spec.MySQL.Version = "9.7"
	size := resource.MustParse("1Gi")
	c.Spec.Storage.Size = &size
	// What Dolphin's defaulting webhook admits on a create (defaults, its finalizer), as
	// moco's workload gets what moco's mutating webhook would set.
	create := admission.NewContextWithRequest(context.Background(),
		admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create}})
	if err := (&webhookv1beta1.MySQLClusterDefaulter{}).Default(create, c); err != nil {
		return nil, fmt.Errorf("while defaulting cluster %s/%s: %w", namespace, name, err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		return nil, fmt.Errorf("while converting cluster %s/%s: %w", namespace, name, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// moco runs cybozu-go/moco's controller from its module (moduleDir): its CRDs and
// cert-manager's (it creates Certificates; no cert-manager controller runs, so the gRPC
// Secret it copies from one never appears: the same for every N). qps 0 keeps its
// default client QPS (20).
func moco(moduleDir, bin string, qps int) operator {
	ns := "moco-system"
	name := "moco"
	if qps > 0 {
		name = fmt.Sprintf("moco-qps%d", qps)
	}
	return operator{
		name: name, namespace: ns, bin: bin,
		crds: []string{filepath.Join(moduleDir, "config/crd/bases"), filepath.Join(moduleDir, "config/crd/tests/third")},
		rbac: []string{filepath.Join(moduleDir, "config/rbac/role.yaml"), filepath.Join(moduleDir, "config/rbac/leader_election_role.yaml")},
		gvr:  schema.GroupVersionResource{Group: "moco.cybozu.com", Version: "v1beta2", Resource: "mysqlclusters"},
		args: func(dir string) []string {
			a := []string{"--metrics-addr=" + metricsAddr, "--health-probe-addr=" + probeAddr, "--pprof-addr=" + pprofAddr,
				"--webhook-addr=" + webhookAddr, "--cert-dir=" + filepath.Join(dir, "webhook"),
				"--grpc-cert-dir=" + filepath.Join(dir, "grpc")}
			if qps > 0 {
				a = append(a, fmt.Sprintf("--apiserver-qps-throttle=%d", qps))
			}
			return a
		},
		env:       []string{"POD_NAMESPACE=" + ns},
		prepare:   mocoCertificates,
		cluster:   mocoCluster,
		workqueue: "mysqlcluster",
	}
}

// mocoCertificates writes the webhook server's and the gRPC client's certificates moco
// refuses to start without.
func mocoCertificates(dir string) error {
	now := time.Now()
	ca, err := pki.NewCA("moco-bench", now, 24*time.Hour, nil)
	if err != nil {
		return err
	}
	kp, err := pki.IssueServer(ca, []string{"moco-webhook-service.moco-system.svc"}, now, 24*time.Hour, nil)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"webhook/tls.crt": kp.CertPEM, "webhook/tls.key": kp.KeyPEM,
		"grpc/ca.crt": ca.CertPEM, "grpc/tls.crt": kp.CertPEM, "grpc/tls.key": kp.KeyPEM,
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("while writing moco's certificates: %w", err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return fmt.Errorf("while writing moco's certificates: %w", err)
		}
	}
	return nil
}

// mocoCluster is what moco's mutating webhook would admit: its finalizer and a server ID
// base set (the webhook picks a random one; here each cluster gets its own range).
func mocoCluster(namespace, name string, i int) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
		"metadata": map[string]any{"namespace": namespace, "name": name,
			"finalizers": []any{"moco.cybozu.com/mysqlcluster"}},
		"spec": map[string]any{
			"replicas":     int64(3),
			"serverIDBase": int64(1 + i*10),
			"podTemplate": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "mysqld", "image": "ghcr.io/cybozu-go/moco/mysql:8.4.8"},
			}}},
			"volumeClaimTemplates": []any{map[string]any{
				"metadata": map[string]any{"name": "mysql-data"},
				"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"},
					"resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}},
			}},
		},
	}}
	return u, nil
}

package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// coreDNSManifest is CoreDNS serving cluster.local (no upstream: nothing outside exists),
// as the cluster add-on is deployed: its RBAC, Corefile, a Deployment (%d replicas on
// different nodes, so that losing one node leaves names answered) and the kube-dns
// Service on DNSServiceIP. %s is the image.
const coreDNSManifest = `apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
           pods insecure
           fallthrough in-addr.arpa ip6.arpa
        }
        cache 5
        loop
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: %d
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {k8s-app: kube-dns}}
            topologyKey: kubernetes.io/hostname
      serviceAccountName: coredns
      dnsPolicy: Default
      priorityClassName: system-cluster-critical
      containers:
      - name: coredns
        image: %s
        imagePullPolicy: Never
        args: ["-conf", "/etc/coredns/Corefile"]
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
        ports:
        - {containerPort: 53, name: dns, protocol: UDP}
        - {containerPort: 53, name: dns-tcp, protocol: TCP}
        readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 1}
        livenessProbe: {httpGet: {path: /health, port: 8080}, periodSeconds: 10}
        securityContext:
          readOnlyRootFilesystem: true
          allowPrivilegeEscalation: false
          capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}
        resources: {requests: {cpu: 50m, memory: 70Mi}, limits: {memory: 170Mi}}
      volumes:
      - {name: config, configMap: {name: coredns}}
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: ` + DNSServiceIP + `
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
`

// startDNS deploys CoreDNS, waits until it is ready, and points this namespace's resolver
// at it (a resolv.conf bind-mounted over /etc/resolv.conf in the private mount namespace
// only), so that tests and the operator run as a process resolve the names pods resolve.
func (c *Cluster) startDNS(ctx context.Context) error {
	cl, err := client.New(c.restConfig, client.Options{})
	if err != nil {
		return fmt.Errorf("while creating a client: %w", err)
	}
	if err := ApplyManifest(ctx, cl, fmt.Sprintf(coreDNSManifest, min(2, len(c.Nodes)), c.cfg.CoreDNSImage)); err != nil {
		return fmt.Errorf("while deploying CoreDNS: %w", err)
	}
	resolv := filepath.Join(c.cfg.Dir, "resolv.conf")
	if err := writeFile(resolv, "nameserver "+DNSServiceIP+"\nsearch svc.cluster.local cluster.local\noptions ndots:5 timeout:1 attempts:2\n"); err != nil {
		return err
	}
	if err := syscall.Mount(resolv, "/etc/resolv.conf", "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("while bind-mounting %s over /etc/resolv.conf: %w", resolv, err)
	}
	c.resolvMounted = true
	return poll(ctx, "CoreDNS to answer", 2*time.Minute, func(ctx context.Context) (bool, error) {
		if err := c.Healthy(); err != nil {
			return false, err
		}
		return resolves(ctx, "kubernetes.default.svc.cluster.local"), nil
	})
}

// resolves reports whether CoreDNS answers for name (asked directly, not through
// resolv.conf, which Go's resolver rereads only every few seconds).
func resolves(ctx context.Context, name string) bool {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		d := net.Dialer{Timeout: time.Second}
		return d.DialContext(ctx, network, net.JoinHostPort(DNSServiceIP, "53"))
	}}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addrs, err := r.LookupHost(ctx, name)
	return err == nil && len(addrs) > 0
}

// ApplyManifest creates the objects of a multi-document YAML manifest, leaving those that
// exist as they are.
func ApplyManifest(ctx context.Context, cl client.Client, manifest string) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("while decoding the manifest: %w", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := cl.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("while creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
}

// Package localcluster runs a real Kubernetes control plane for tests and the demo, with
// no container runtime: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok (fake nodes) as local processes, inside a private network namespace.
//
// The network namespace is what makes fake pods real enough. Inside it the pod CIDR is
// routed as local addresses on lo, so every pod IP that kwok hands out is an address of
// this machine: a process bound to a pod's IP answers for that pod. The API server reaches
// a webhook served by a local process through its Service (with aggregator routing it dials
// the endpoint IP), the operator reaches each pod's mysqld by IP, and fixed ports cannot
// collide with anything outside. Nothing sent inside the namespace leaves it.
//
// The pieces:
//   - EnterNetNS re-executes the calling program in a new network namespace (and a user
//     namespace when not root) and sets up lo, the local pod-CIDR route and the API
//     server's advertise address. Call it first thing from TestMain or main.
//   - Start brings up the control plane with its own PKI, waits until every component
//     works (a fake node is Ready, a default StorageClass exists) and writes a kubeconfig.
//   - The volume provisioner binds each PersistentVolumeClaim to a hostPath volume in the
//     cluster's folder, so StatefulSet pods schedule and keep their data across restarts.
//   - The pod runner plays the container runtime for MySQL pods: one real mysqld per pod,
//     bound to the pod's IP:3306, its data on the pod's volume, restarted when it exits.
//
// Stop ends every process; each child also carries a parent-death signal, so a test binary
// that dies leaves nothing running, and the namespace disappears with its last process.
package localcluster

// Package localcluster runs a real Kubernetes cluster for tests and the demo without a
// container engine: etcd, kube-apiserver, kube-controller-manager and kube-scheduler as
// local processes, and real nodes — a containerd (runc, CNI bridge) and a kubelet per node,
// one kube-proxy, CoreDNS — inside private network and mount namespaces. It knows nothing
// of Dolphin's API or operator (test/ground puts Dolphin on it); its certificates come from
// internal/pki, the project's one certificate issuer, which depends on nothing else here.
//
// The pieces:
//   - EnterNetNS re-executes the calling program in new network and mount namespaces,
//     makes mounts private and sets up lo and forwarding. Call it first thing from
//     TestMain or main.
//   - Start brings up the control plane with its own PKI, then Config.Nodes nodes (each
//     with its own cgroup subtree, bridge, pod subnet and IP, the given images imported),
//     kube-proxy and CoreDNS, and waits until every node is Ready and names resolve. With
//     Nodes 0 it registers one kwok node instead (pods that run nothing), for benchmarks
//     where simulation is the point.
//   - The volume provisioner binds each PersistentVolumeClaim of the default class to a
//     hostPath volume in the cluster's folder.
//   - Node.Stop kills a node (its kubelet, containerd and containers) and drops its
//     traffic; RestartNode brings it back.
//
// Stop kills every node's cgroup subtree, stops the control plane, unmounts what the nodes
// mounted and removes the folder; a cluster whose test was killed is cleaned up by the next
// one to start.
package localcluster

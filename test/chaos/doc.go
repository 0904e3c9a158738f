// Package chaos runs fault rounds against one MySQLCluster on the real-node ground while a
// writer commits through the primary Service and a sampler watches every instance's
// read-only state: mysqld killed or hung, partitions made with iptables rules inside pods'
// network namespaces, the operator killed mid-failover and mid-clone, kube-apiserver
// restarted mid-switchover, spec.primary changed twice at once. After every round it checks
// that no acknowledged write is missing from the primary, that the cluster is Ready again
// within a bound, and that another cluster was reconciled during the round (scaled between
// one and two instances, its status at the new generation while the fault holds, and its
// instances all Ready by the round's end); at the end,
// that no sample saw two writable instances and that the cluster's deletion completes.
package chaos

// Package envtest holds the integration tier that runs against a real API server started
// by controller-runtime's envtest, using the same etcd and kube-apiserver binaries as the
// local cluster (KUBEBUILDER_ASSETS, set by the Makefile). There is no controller-manager
// here: no garbage collection and no namespace deletion, so tests clean up what they make.
package envtest

// Package e2e runs the operator binary against the local cluster (control plane, kwok,
// one real mysqld per pod) as it runs in a real cluster: in a pod's place, behind its
// webhook Service, with the garbage collector and the StatefulSet controller at work.
package e2e

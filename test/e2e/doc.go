// Package e2e runs Dolphin on the real-node ground (test/ground): the operator installed by
// `make deploy` as its Deployment's pod, MySQL pods as real containers from the operator's
// own pod spec (init script, my.cnf, probes, security context), Services through
// kube-proxy and names through CoreDNS, with the garbage collector and the StatefulSet
// controller at work.
package e2e

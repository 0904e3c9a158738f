// Package olm runs Operator Lifecycle Manager v0 (its olm and catalog operators, built from
// the pinned module in hack/tools/olm) on the local control plane, serves Dolphin's
// file-based catalog with opm, and drives installs and upgrades through Subscriptions the
// way a platform team does.
//
// Its tests install Dolphin from the catalog at the previous release, run the real operator
// binary as the pod OLM's Deployment created (under the ServiceAccount and RBAC the CSV
// asked for, with the webhook certificate OLM generated), then publish the next version and
// check that OLM upgrades the operator while the MySQL cluster it manages keeps serving.
//
// What is played rather than real: pods are kwok's, so a Deployment being Available says
// nothing about the operator; the operator's behaviour comes from the binary run in the
// pod's place (localcluster.RunAsPod). Both catalog versions run the binary of this
// checkout: what changes between them is everything OLM installs (CSV, RBAC, CRDs,
// webhooks, Deployment).
package olm

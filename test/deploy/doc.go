// Package deploy tests the install without OLM: `make deploy` applies config/default to a
// local control plane, the real manager binary runs as the Deployment's pod with exactly the
// RBAC of its ServiceAccount, issues its own webhook certificate, injects the CA, and serves
// admission and conversion; `make undeploy` removes it all.
package deploy

// Package deploy tests the install without OLM on the shared ground, whose operator `make
// deploy` installed (config/default: the real manager binary as the Deployment's pod with
// exactly the RBAC of its ServiceAccount, its own webhook certificate, the CA injected):
// a restart keeps the certificate, and an upgrade from the previous build, `make deploy`
// again, restarts no database. test/helm removes a `make deploy` install with `make
// undeploy` and installs with the Helm chart.
package deploy

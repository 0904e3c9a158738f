// Package helm tests the installs on a ground of their own, with no operator to begin
// with: `make deploy` followed by `make undeploy`, which removes it all, then the Helm
// chart installed, upgraded, uninstalled and installed again with cert-manager's
// certificate.
package helm

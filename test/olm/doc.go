// Package olm runs Operator Lifecycle Manager v0 (its olm and catalog operators, built from
// the pinned module in hack/tools/olm) against the real-node test ground, serves Dolphin's
// file-based catalog with opm, and drives installs and upgrades through Subscriptions the
// way a platform team does.
//
// Its tests install Dolphin from the catalog at the previous release; OLM's Deployment runs
// the operator image as a real pod (under the ServiceAccount and RBAC the CSV asked for,
// with the webhook certificate OLM generated, pointed at the ground's MySQL image through
// the Subscription's spec.config.env); then they publish the next version and check that
// OLM upgrades the operator while the MySQL cluster it manages keeps serving.
//
// What is not the production path: the catalog carries the bundles inline and is served by
// opm as a local process behind an address CatalogSource (no bundle or catalog image), and
// both catalog versions run this checkout's operator image, tagged on the nodes as each
// CSV's image: what changes between them is everything OLM installs (CSV, RBAC, CRDs,
// webhooks, Deployment).
package olm

// Package olm runs Operator Lifecycle Manager v0 (its olm and catalog operators, built from
// the pinned module in hack/tools/olm) against the real-node test ground, serves Dolphin's
// file-based catalog with opm, and drives installs and upgrades through Subscriptions the
// way a platform team does.
//
// Its tests install Dolphin from images, as a cluster does: the release images (`make
// release-images`: each release's operator and bundle, earlier ones built from their commit,
// opm's and OLM's util image) are pushed to the ground's registry, which the nodes use as
// the mirror of quay.io; each catalog is built into catalog.Dockerfile's image and named by
// the CatalogSource, whose registry pod OLM runs on a node, and OLM unpacks each bundle
// image with a Job. The tests install the previous release (its own operator image, under
// its CSV's RBAC, pointed at the ground's MySQL image through the Subscription's
// spec.config.env), then publish the next version and check that OLM upgrades the operator
// and the new one takes the cluster over and keeps it serving.
//
// What is not the production path: OLM's olm and catalog operators run as processes of the
// test, not as pods; OLM's util image carries only what the unpack Jobs use
// (release.Upstream.UtilImage).
package olm

// Package api is the root of Dolphin's API packages: mysql.dolphin-operator.io in v1alpha1
// (the shape early users wrote) and v1beta1 (the hub and storage version), each in its own
// sub-package.
package api

// Package resources holds the pure builders of a MySQLCluster's children: each takes the
// (defaulted) cluster and whatever else it needs as plain values, and returns the desired
// object, or nil when the object must not exist. No builder reads or writes the cluster;
// the reconciler applies what they return through internal/apply.
//
// Builders set every field the API server would otherwise default when that field has no
// "omitempty" (a Service port's targetPort, for example): the apply helper compares the
// desired object with the live one field by field, and a field the server fills
// differently would make every reconcile write.
package resources

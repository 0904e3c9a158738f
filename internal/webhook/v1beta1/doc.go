// Package v1beta1 holds the admission webhooks of mysql.dolphin-operator.io/v1beta1: a
// Defaulter and a Validator per kind. Admission for v1alpha1 objects comes here too: the
// API server converts them to v1beta1 first (matchPolicy Equivalent).
//
// Validation is a list of small functions, each returning a field.ErrorList; the
// Validator runs them all and returns one Invalid error, so a user sees every problem at
// once, each naming its field. The same cheap invariants are also CEL rules on the CRD, so
// they hold when the webhook is not installed.
package v1beta1

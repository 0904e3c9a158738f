// Package tiers holds the tests of hack/run-tiers.sh, the script `make test` runs: its
// output is what CI keeps, so what it prints on a failure is checked here.
package tiers

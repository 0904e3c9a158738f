// Package bench holds benchmarks that need the whole test ground (real nodes, the operator
// installed by make deploy, MySQL pods). They print measurements; they assert no timing.
package bench

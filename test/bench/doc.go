// Package bench holds benchmarks that need the whole test ground (control plane, kwok, real
// mysqld per pod, the operator binary). They print measurements; they assert no timing.
package bench

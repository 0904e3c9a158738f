// Package bundle checks the generated OLM bundle and the Dockerfiles without a cluster or
// a container engine: the CSV's descriptors cover what the samples set, its webhook
// definitions include conversion for both CRDs, its related images are the operand images
// the manager is configured with, and the Dockerfiles agree with the files they package.
package bundle

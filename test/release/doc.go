// Package release builds, without a container engine, the images a Dolphin release
// publishes and the operator-framework images OLM runs them with, so that the OLM tier
// installs from images as a cluster does.
//
// Dolphin's own images are built from its Dockerfiles, not from a description of them: a
// small interpreter (ParseDockerfile, Build) applies the final stage's instructions (FROM,
// LABEL, ENV, ARG, USER, WORKDIR, COPY, ADD, ENTRYPOINT, CMD, EXPOSE) to a spec of the base
// image, with the builder stages' outputs given by the caller (the Go builds, opm's cache,
// which the caller makes as those stages' RUN lines do). An instruction it cannot carry out
// is an error, so the image and its Dockerfile cannot drift apart. opm's image and
// operator-sdk's scorecard-test and scorecard-untar images are built the same way from the
// Dockerfiles in their pinned modules; OLM's util image is laid out after its Dockerfile (UtilImage says what
// it leaves out).
//
// Base images stand for what the built images use of them: distroless's static:nonroot
// and static:debug (with Debian's static busybox), UBI minimal (passwd only).
package release

package cli

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Exit codes: scripts tell outcomes apart by them (docs/plugin.md lists them).
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitFailed: anything not covered below (the API server could not be reached, a
	// request failed).
	ExitFailed = 1
	// ExitUsage: wrong arguments or flags.
	ExitUsage = 2
	// ExitNotFound: the cluster, or the instance named, does not exist.
	ExitNotFound = 3
	// ExitForbidden: the API server refused a request (RBAC); the message names the verb
	// and the resource.
	ExitForbidden = 4
	// ExitTimeout: the operator did not finish (or did not start) in time; the change asked
	// for stays asked for.
	ExitTimeout = 5
	// ExitRefused: the cluster's state rules the request out (a switchover of a paused
	// cluster).
	ExitRefused = 6
)

// codedError carries the exit code of the error it wraps.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

func withCode(code int, format string, args ...any) error {
	return &codedError{code: code, err: fmt.Errorf(format, args...)}
}

func usageErrorf(format string, args ...any) error { return withCode(ExitUsage, format, args...) }

// exitCode is the exit code an error ends the command with.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var c *codedError
	if errors.As(err, &c) {
		return c.code
	}
	switch {
	case apierrors.IsNotFound(err):
		return ExitNotFound
	case apierrors.IsForbidden(err):
		return ExitForbidden
	}
	// cobra's own errors: an unknown command or flag, a wrong number of arguments.
	if msg := err.Error(); strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "unknown shorthand flag") || strings.Contains(msg, "flag needs an argument") {
		return ExitUsage
	}
	return ExitFailed
}

// apiError says which request failed and why, in the words a user acts on: what does not
// exist, or which RBAC verb on which resource was refused.
func apiError(verb, resource, namespace, name string, err error) error {
	if err == nil {
		return nil
	}
	what := resource
	if name != "" {
		what += " " + name
	}
	where := ""
	if namespace != "" {
		where = " in namespace " + namespace
	}
	switch {
	case apierrors.IsNotFound(err) && name != "":
		return &codedError{code: ExitNotFound, err: fmt.Errorf("%s not found%s", what, where)}
	case apierrors.IsForbidden(err):
		return &codedError{code: ExitForbidden, err: fmt.Errorf(
			"refused: you may not %s %s%s (RBAC: grant the verb %q on %q): %w", verb, what, where, verb, resource, err)}
	case apierrors.IsConflict(err):
		return fmt.Errorf("%s %s%s: it changed meanwhile, run the command again: %w", verb, what, where, err)
	}
	return fmt.Errorf("while trying to %s %s%s: %w", verb, what, where, err)
}

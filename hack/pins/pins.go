//go:build pins

// Package pins keeps in go.mod the versions of libraries that the design fixes before the
// code that imports them lands (operator-lib, for the upgrade and scorecard work). The
// build tag keeps it out of every build; `go mod tidy` still reads it, so the pins
// survive. Delete a line once a real package imports that module.
package pins

import (
	_ "github.com/operator-framework/operator-lib/handler"
)

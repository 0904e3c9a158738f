package mysql

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"

	"github.com/go-sql-driver/mysql"
)

// Fault is the kind of reason an instance did not answer, from the error's type: what a
// human is told, and what tells a dead mysqld from one that hangs or cannot be reached.
type Fault string

// Faults, by what the operator saw.
const (
	// FaultRefused: the address answered that nothing listens (mysqld down or restarting).
	FaultRefused Fault = "Refused"
	// FaultNoAnswer: nothing answered in time: a hung mysqld (it may still accept TCP), a
	// lost node or a partition.
	FaultNoAnswer Fault = "NoAnswer"
	// FaultRejected: mysqld answered with an error (access denied, too many connections).
	FaultRejected Fault = "Rejected"
	// FaultDropped: an open connection was closed or reset under the call.
	FaultDropped Fault = "Dropped"
	// FaultOther: anything else (a malformed answer, a local error).
	FaultOther Fault = "Other"
)

// Classify names the kind of an error returned by this package (or a dial).
func Classify(err error) Fault {
	var me *mysql.MySQLError
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, syscall.ECONNREFUSED):
		return FaultRefused
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout(),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.ETIMEDOUT):
		return FaultNoAnswer
	case errors.As(err, &me):
		return FaultRejected
	case restarting(err):
		return FaultDropped
	}
	return FaultOther
}

package mysql

import (
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	driver "github.com/go-sql-driver/mysql"
)

// SetDriverLogger sends what the MySQL driver logs of its own (a broken idle connection
// it drops, a packet it could not read) to l, instead of its plain lines on stderr: the
// operator's log stays one format.
func SetDriverLogger(l logr.Logger) {
	_ = driver.SetLogger(driverLogger{l}) // only a nil logger is refused
}

type driverLogger struct{ l logr.Logger }

func (d driverLogger) Print(v ...any) {
	d.l.Info(strings.TrimSpace(fmt.Sprint(v...)))
}

package mysql

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
)

func TestTheDriversLinesGoToTheOperatorsLogger(t *testing.T) {
	var got []string
	l := funcr.New(func(prefix, args string) { got = append(got, prefix+" "+args) }, funcr.Options{})
	driverLogger{l.WithName("mysql-driver")}.Print("connection.go:803 ", "closing bad idle connection: ", "EOF\n")
	if len(got) != 1 || !strings.Contains(got[0], `"msg"="connection.go:803 closing bad idle connection: EOF"`) ||
		!strings.HasPrefix(got[0], "mysql-driver") {
		t.Fatalf("logged %q", got)
	}
}

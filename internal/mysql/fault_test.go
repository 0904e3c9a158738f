package mysql

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Fault
	}{
		{nil, ""},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, FaultRefused},
		{fmt.Errorf("10.0.0.1:3306: reading server state: %w", context.DeadlineExceeded), FaultNoAnswer},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, FaultNoAnswer},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}, FaultNoAnswer},
		{fmt.Errorf("x: %w", &mysql.MySQLError{Number: 1045, Message: "Access denied"}), FaultRejected},
		{fmt.Errorf("x: %w", mysql.ErrInvalidConn), FaultDropped},
		{io.ErrUnexpectedEOF, FaultDropped},
		{errors.New("something else"), FaultOther},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// A listener that accepts and never speaks is a hung mysqld as the network sees it: the
// call ends at its context deadline, and the error says "no answer", not "refused".
func TestAServerThatAcceptsButNeverAnswersIsNoAnswerWithinTheDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	in, err := Open(Config{Addr: ln.Addr().String(), User: "u", Password: "p", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = in.Status(ctx)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Status took %s against its 300ms deadline", took)
	}
	if Classify(err) != FaultNoAnswer {
		t.Fatalf("got %v (%s), want a no-answer fault", err, Classify(err))
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	closed.Close()
	down, err := Open(Config{Addr: addr, User: "u", Password: "p", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	if _, err := down.Status(context.Background()); Classify(err) != FaultRefused {
		t.Fatalf("a closed port: got %v (%s), want refused", err, Classify(err))
	}
}

// Package s3server runs a real S3 server (versitygw, `make versitygw`) on a folder, for
// the backup tests and benchmarks that run outside the real-node ground (the ground has
// its own, in its namespace: ground.StartS3).
package s3server

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/dolphin-operator/dolphin/internal/objectstore"
)

// Root credentials of every server this package starts.
const (
	AccessKeyID     = "test"
	SecretAccessKey = "test-secret"
)

// Server is one versitygw process on 127.0.0.1.
type Server struct {
	Endpoint  string
	addr, dir string
	mu        sync.Mutex
	cmd       *exec.Cmd
	out       bytes.Buffer
}

// Start runs a server on a free port with its objects in dir.
func Start(dir string) (*Server, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{addr: l.Addr().String(), dir: dir}
	l.Close()
	s.Endpoint = "http://" + s.addr
	return s, s.Restart()
}

// Restart starts the server again (after Stop) on the same port and folder, and waits
// until it accepts connections (20 s at most).
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	bin := filepath.Join(os.Getenv("DOLPHIN_BIN_DIR"), "versitygw")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("the S3 server: %w (run `make versitygw`)", err)
	}
	cmd := exec.Command(bin, "--port", s.addr, "posix", s.dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+AccessKeyID, "ROOT_SECRET_ACCESS_KEY="+SecretAccessKey)
	s.out.Reset()
	cmd.Stdout, cmd.Stderr = &s.out, &s.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd = cmd
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", s.addr, 200*time.Millisecond); err == nil {
			return c.Close()
		}
	}
	return fmt.Errorf("versitygw does not listen on %s: %s", s.addr, s.out.String())
}

// Stop kills the server: a store that goes away mid-request.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Store is a client of bucket with secret as the secret key (the root one, or a wrong one).
func (s *Server) Store(bucket, secret string) (*objectstore.Store, error) {
	if s == nil {
		return nil, errors.New("no S3 server")
	}
	return objectstore.New(objectstore.Config{Endpoint: s.Endpoint, Bucket: bucket, PathStyle: true,
		AccessKeyID: AccessKeyID, SecretAccessKey: secret})
}

package ground

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/dolphin-operator/dolphin/internal/objectstore"
	"github.com/dolphin-operator/dolphin/test/localcluster"
)

// S3Port is where the ground's S3 server listens, on localcluster.HostIP: pods reach it
// there as they reach the API server.
const S3Port = 7070

// S3 is a real S3 server (versitygw, `make versitygw`) on a folder of the cluster's,
// started by the test process inside the cluster's namespace.
type S3 struct {
	// Endpoint is its URL, for a backup target and for the test's own client.
	Endpoint string
	// AccessKeyID and SecretAccessKey are its root credentials.
	AccessKeyID, SecretAccessKey string
	dir, bin                     string
	cluster                      *localcluster.Cluster
	proc                         *localcluster.Process
}

// StartS3 starts the ground's S3 server; Stop (or the cluster's end) ends it.
func (g *Ground) StartS3(ctx context.Context) (*S3, error) {
	bin := filepath.Join(os.Getenv("DOLPHIN_BIN_DIR"), "versitygw")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the S3 server: %w (run `make versitygw`)", err)
	}
	dir := filepath.Join(g.Dir(), "s3")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &S3{Endpoint: fmt.Sprintf("http://%s:%d", localcluster.HostIP, S3Port), AccessKeyID: "dolphin-test",
		SecretAccessKey: "dolphin-test-secret", dir: dir, bin: bin, cluster: g.Cluster}
	return s, s.Start(ctx)
}

// Start (re)starts the server and waits until it accepts connections.
func (s *S3) Start(ctx context.Context) error {
	p, err := s.cluster.Run("versitygw", s.bin,
		[]string{"ROOT_ACCESS_KEY_ID=" + s.AccessKeyID, "ROOT_SECRET_ACCESS_KEY=" + s.SecretAccessKey},
		"--port", fmt.Sprintf("%s:%d", localcluster.HostIP, S3Port), "posix", s.dir)
	if err != nil {
		return fmt.Errorf("the S3 server: %w", err)
	}
	s.proc = p
	return Poll(ctx, 30*time.Second, func() error {
		if err := p.Exited(); err != nil {
			return fmt.Errorf("the S3 server exited: %w", err)
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("%s:%d", localcluster.HostIP, S3Port), time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// Stop ends the server (SIGKILL after a second): what a store that goes away looks like.
func (s *S3) Stop() {
	if s.proc != nil {
		s.proc.Stop(time.Second)
		s.proc = nil
	}
}

// Running reports whether the server was started and not stopped since.
func (s *S3) Running() bool { return s.proc != nil }

// Store is a client of bucket, as the test's own view of what is stored.
func (s *S3) Store(bucket string) (*objectstore.Store, error) {
	if s == nil {
		return nil, errors.New("no S3 server")
	}
	return objectstore.New(objectstore.Config{Endpoint: s.Endpoint, Bucket: bucket, PathStyle: true,
		AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey})
}

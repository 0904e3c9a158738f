package localcluster

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// RegistryPort is where the cluster's registry listens, on HostIP.
const RegistryPort = 5000

// Registry is an OCI distribution registry (go-containerregistry's) served by the process
// that runs the cluster, on HostIP:RegistryPort, its blobs in the cluster's folder. Every
// node's containerd takes it as the mirror of the hosts in Config.Mirrors: an image named
// quay.io/x/y:t is pulled from it as x/y:t, the way a disconnected cluster pulls release
// images from its own mirror under their published names. Anything that speaks the
// distribution API (the harness's pushes, a pod) reaches it at Addr.
type Registry struct {
	// Addr is host:port.
	Addr   string
	srv    *http.Server
	done   chan struct{}
	errLog string
}

// startRegistry serves a registry with its blobs under dir.
func startRegistry(dir string) (*Registry, error) {
	if err := os.MkdirAll(filepath.Join(dir, "blobs"), 0o755); err != nil {
		return nil, fmt.Errorf("while creating the registry's folder: %w", err)
	}
	addr := net.JoinHostPort(HostIP, fmt.Sprint(RegistryPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	logPath := filepath.Join(dir, "registry.log")
	lf, err := os.Create(logPath)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("while creating %s: %w", logPath, err)
	}
	h := registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(filepath.Join(dir, "blobs"))),
		registry.Logger(log.New(lf, "", log.LstdFlags)))
	r := &Registry{Addr: addr, done: make(chan struct{}), errLog: logPath,
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(r.done)
		defer lf.Close()
		_ = r.srv.Serve(ln)
	}()
	return r, nil
}

// stop closes the listener and every connection.
func (r *Registry) stop() {
	if r == nil {
		return
	}
	_ = r.srv.Close()
	<-r.done
}

// Push uploads the image of an OCI image-layout tarball (test/oci's, one image) under each
// of refs. A ref names the image as the nodes will (quay.io/x/y:t): it is stored as x/y:t,
// which is where a node's containerd looks for it through the mirror.
func (r *Registry) Push(ctx context.Context, tarball string, refs ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp(filepath.Dir(r.errLog), "push-")
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	defer os.RemoveAll(dir)
	img, err := readLayout(tarball, dir)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		local, err := r.Local(ref)
		if err != nil {
			return err
		}
		if err := remote.Write(local, img, remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("while pushing %s as %s: %w", filepath.Base(tarball), ref, err)
		}
	}
	return nil
}

// Local is ref's place in this registry: its repository and tag or digest on Addr.
func (r *Registry) Local(ref string) (name.Reference, error) {
	parsed, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("registry: image %q: %w", ref, err)
	}
	repo := parsed.Context().RepositoryStr()
	local, err := name.ParseReference(r.Addr+"/"+repo+separator(parsed)+parsed.Identifier(), name.Insecure)
	if err != nil {
		return nil, fmt.Errorf("registry: image %q: %w", ref, err)
	}
	return local, nil
}

func separator(ref name.Reference) string {
	if _, ok := ref.(name.Digest); ok {
		return "@"
	}
	return ":"
}

// Digest is the digest of what the registry serves as ref.
func (r *Registry) Digest(ctx context.Context, ref string) (v1.Hash, error) {
	local, err := r.Local(ref)
	if err != nil {
		return v1.Hash{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	d, err := remote.Head(local, remote.WithContext(ctx))
	if err != nil {
		return v1.Hash{}, fmt.Errorf("registry: %s: %w", ref, err)
	}
	return d.Digest, nil
}

// readLayout unpacks an OCI image-layout tarball into dir and returns its only image.
func readLayout(tarball, dir string) (v1.Image, error) {
	f, err := os.Open(tarball)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("while reading %s: %w", tarball, err)
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			err = writeFrom(p, tr)
		}
		if err != nil {
			return nil, fmt.Errorf("while unpacking %s: %w", tarball, err)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is no OCI image layout: %w", tarball, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tarball, err)
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d images, want one", tarball, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}

func writeFrom(p string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// hostsTOML is containerd's configuration for one mirrored host: pull and resolve from the
// cluster's registry over plain HTTP, never from the host itself (it is not reachable).
func hostsTOML(host, registryAddr string) string {
	return fmt.Sprintf(`server = "https://%s"

[host."http://%s"]
  capabilities = ["pull", "resolve"]
`, host, registryAddr)
}

// writeMirrors writes one hosts.toml per mirrored host under dir (containerd's config_path).
func writeMirrors(dir string, hosts []string, registryAddr string) error {
	for _, h := range hosts {
		if strings.ContainsAny(h, "/ ") || h == "" {
			return fmt.Errorf("localcluster: mirror %q is no registry host", h)
		}
		if err := os.MkdirAll(filepath.Join(dir, h), 0o755); err != nil {
			return fmt.Errorf("localcluster: %w", err)
		}
		if err := writeFile(filepath.Join(dir, h, "hosts.toml"), hostsTOML(h, registryAddr)); err != nil {
			return err
		}
	}
	return nil
}

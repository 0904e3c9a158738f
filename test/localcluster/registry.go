package localcluster

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dolphin-operator/dolphin/test/oci"
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
	Addr string
	srv  *http.Server
	done chan struct{}
	// dir holds the blobs, the log and the pushes' scratch folders.
	dir string
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
	r := &Registry{Addr: addr, done: make(chan struct{}), dir: dir,
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
	dir, err := os.MkdirTemp(r.dir, "push-")
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	defer os.RemoveAll(dir)
	img, err := oci.LoadImage(tarball, dir)
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

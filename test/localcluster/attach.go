package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// A cluster is owned by the process that started it: its control plane, containerds and
// kubelets are that process's children and end with it. Other processes of the same
// namespaces (the test packages a ground runs one after another) attach to it: they read
// its description and reach everything the API server, the nodes' sockets and /proc
// offer themselves, and ask the owner, over a Unix socket, for what only the owner can do
// (stop or restart a node, restart kube-apiserver, say whether every component runs).

// stateFile and controlSocket are in the cluster's folder while its owner serves.
const (
	stateFile     = "attach.json"
	controlSocket = "control.sock"
)

// state is what an attaching process needs to know of a running cluster.
type state struct {
	Dir, BinDir, Kubeconfig string
	PauseImage              string
	Nodes                   []int
	RegistryAddr            string
}

// Serve lets processes of this namespace attach to the cluster (Attach with Dir) until ctx
// ends: it writes the cluster's description and answers their requests.
func (c *Cluster) Serve(ctx context.Context) error {
	st := state{Dir: c.cfg.Dir, BinDir: c.cfg.BinDir, Kubeconfig: c.Kubeconfig, PauseImage: c.cfg.PauseImage}
	for _, n := range c.Nodes {
		st.Nodes = append(st.Nodes, n.index)
	}
	if c.Registry != nil {
		st.RegistryAddr = c.Registry.Addr
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("while describing the cluster: %w", err)
	}
	sock := filepath.Join(c.cfg.Dir, controlSocket)
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("while listening on %s: %w", sock, err)
	}
	srv := &http.Server{Handler: c.controlHandler(ctx), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return writeFile(filepath.Join(c.cfg.Dir, stateFile), string(raw))
}

// controlHandler answers an attached process's requests; an error is a 500 with its text.
func (c *Cluster) controlHandler(ctx context.Context) http.Handler {
	mux := http.NewServeMux()
	node := func(f func(context.Context, *Node) error) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			n := c.Node(r.PathValue("name"))
			if n == nil {
				http.Error(w, "no node "+r.PathValue("name"), http.StatusNotFound)
				return
			}
			reply(w, f(ctx, n))
		}
	}
	mux.HandleFunc("POST /nodes/{name}/stop", node(func(_ context.Context, n *Node) error { return n.Stop() }))
	mux.HandleFunc("POST /nodes/{name}/restart", node(c.RestartNode))
	mux.HandleFunc("GET /nodes/{name}/running", func(w http.ResponseWriter, r *http.Request) {
		n := c.Node(r.PathValue("name"))
		if n == nil {
			http.Error(w, "no node "+r.PathValue("name"), http.StatusNotFound)
			return
		}
		fmt.Fprint(w, n.Running())
	})
	mux.HandleFunc("POST /apiserver/restart", func(w http.ResponseWriter, _ *http.Request) { reply(w, c.RestartAPIServer(ctx)) })
	mux.HandleFunc("GET /healthy", func(w http.ResponseWriter, _ *http.Request) { reply(w, c.Healthy()) })
	return mux
}

func reply(w http.ResponseWriter, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// owner is an attached process's line to the cluster's owner.
type owner struct{ http *http.Client }

// call sends one request to the owner and returns its answer's body; a request the owner
// refused or failed is an error with the owner's words.
func (r *owner) call(ctx context.Context, method, path string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://owner"+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("localcluster: asking the cluster's owner to %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("localcluster: reading the owner's answer to %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return "", fmt.Errorf("localcluster: the cluster's owner answered %s %s with %s: %s", method, path, resp.Status,
			strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

// Attach returns the cluster whose folder is dir, started and served (Serve) by another
// process of this namespace. Stop on it ends only what this process started (Run).
func Attach(dir string) (*Cluster, error) {
	if !InNetNS() {
		return nil, ErrNotInNetNS
	}
	raw, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("localcluster: no cluster to attach to in %s (is its owner serving?): %w", dir, err)
	}
	var st state
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("localcluster: %s: %w", filepath.Join(dir, stateFile), err)
	}
	sock := filepath.Join(dir, controlSocket)
	r := &owner{http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}}
	c := &Cluster{cfg: Config{Dir: st.Dir, BinDir: st.BinDir, PauseImage: st.PauseImage, Log: io.Discard, Nodes: len(st.Nodes)},
		remote: r, Kubeconfig: st.Kubeconfig}
	kc, err := clientcmd.LoadFromFile(st.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("localcluster: the attached cluster's kubeconfig: %w", err)
	}
	if c.restConfig, err = clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig(); err != nil {
		return nil, fmt.Errorf("localcluster: the attached cluster's REST config: %w", err)
	}
	c.restConfig.QPS, c.restConfig.Burst = 100, 200
	for _, i := range st.Nodes {
		n := newNode(st.Dir, "", i)
		n.remote = r
		c.Nodes = append(c.Nodes, n)
	}
	if st.RegistryAddr != "" {
		c.Registry = &Registry{Addr: st.RegistryAddr}
	}
	if _, err := r.call(context.Background(), http.MethodGet, "/healthy", 10*time.Second); err != nil {
		return nil, err
	}
	return c, nil
}

// Attached reports whether another process owns the cluster.
func (c *Cluster) Attached() bool { return c.remote != nil }

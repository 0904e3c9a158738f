package ground

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// lookupBound is how long a dial retries a name the cluster's DNS answered with a
// temporary failure or not at all.
const lookupBound = 5 * time.Second

// podPrefix marks an address that names a pod (pod:<namespace>/<name>) rather than host:port.
const podPrefix = "pod:"

func podAddr(namespace, pod string) string { return podPrefix + namespace + "/" + pod }

// hostPort is host's MySQL address; a pod's address (podAddr) is dialled on 3306 already.
func hostPort(host string) string {
	if strings.HasPrefix(host, podPrefix) {
		return host
	}
	return net.JoinHostPort(host, "3306")
}

var dialers sync.Map // *Ground -> the network name its dial function is registered under

// dialNet is the MySQL driver network through which this ground's connections dial: a pod
// address goes to the pod's IP read at that moment, port 3306; a host name is looked up
// again while the cluster's DNS fails it, within lookupBound. Every test tier's
// connections to instances go through it.
func (g *Ground) dialNet() string {
	if name, ok := dialers.Load(g); ok {
		return name.(string)
	}
	name := fmt.Sprintf("ground-%p", g)
	mysql.RegisterDialContext(name, g.dial)
	dialers.Store(g, name)
	return name
}

func (g *Ground) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	if ref, ok := strings.CutPrefix(addr, podPrefix); ok {
		ns, name, _ := strings.Cut(ref, "/")
		ip, err := g.podIP(ctx, ns, name)
		if err != nil {
			return nil, err
		}
		return d.DialContext(ctx, "tcp", net.JoinHostPort(ip, "3306"))
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if net.ParseIP(host) != nil {
		return d.DialContext(ctx, "tcp", addr)
	}
	ips, err := lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	return d.DialContext(ctx, "tcp", net.JoinHostPort(ips[0], port))
}

func (g *Ground) podIP(ctx context.Context, namespace, name string) (string, error) {
	cs, err := kubernetes.NewForConfig(g.RESTConfig())
	if err != nil {
		return "", fmt.Errorf("while creating a client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("while reading pod %s/%s: %w", namespace, name, err)
	}
	if p.Status.PodIP == "" {
		return "", fmt.Errorf("pod %s/%s has no IP", namespace, name)
	}
	return p.Status.PodIP, nil
}

// lookup resolves host, asking again while the answer is a temporary failure, until
// lookupBound has passed.
func lookup(ctx context.Context, host string) ([]string, error) {
	deadline := time.Now().Add(lookupBound)
	for {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ips, err := net.DefaultResolver.LookupHost(lctx, host)
		cancel()
		var dnsErr *net.DNSError
		retry := errors.As(err, &dnsErr) && (dnsErr.IsTemporary || dnsErr.IsTimeout)
		if !retry || time.Now().After(deadline) {
			return ips, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

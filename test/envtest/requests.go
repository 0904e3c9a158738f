package envtest

import (
	"net/http"
	"strings"
	"sync"
)

// RequestCounter counts the requests a manager sends to the API server: all of them, and
// the discovery ones (the group and resource lists a REST mapper reads) apart.
type RequestCounter struct {
	mu        sync.Mutex
	all       int
	discovery []string
}

// Counts returns the requests and the discovery paths counted since the last Reset.
func (c *RequestCounter) Counts() (all int, discovery []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.all, append([]string(nil), c.discovery...)
}

// Reset forgets what was counted so far.
func (c *RequestCounter) Reset() {
	c.mu.Lock()
	c.all, c.discovery = 0, nil
	c.mu.Unlock()
}

// wrap is a rest.Config WrapTransport that counts every request before sending it.
func (c *RequestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.all++
		if req.Method == http.MethodGet && IsDiscovery(req.URL.Path) {
			c.discovery = append(c.discovery, req.URL.Path)
		}
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// IsDiscovery says whether path is one of the API server's discovery documents: /api,
// /apis, a group (/apis/<group>), a group version (/api/v1, /apis/<group>/<version>) or
// the OpenAPI documents. Paths below a group version name resources and are not.
func IsDiscovery(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch parts[0] {
	case "openapi":
		return true
	case "api":
		return len(parts) <= 2
	case "apis":
		return len(parts) <= 3
	}
	return false
}

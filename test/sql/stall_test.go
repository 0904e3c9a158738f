package sql_test

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// stallProxy forwards TCP connections to a server and can stop passing the server's bytes
// on after a budget, mid-stream, without closing anything: what a replica sees of a source
// that was cut off (or died) while sending a transaction.
type stallProxy struct {
	ln       net.Listener
	upstream string

	mu      sync.Mutex
	budget  int64 // bytes from the server still passed on; < 0: no limit
	changed chan struct{}
	conns   []net.Conn
	closed  bool
}

func newStallProxy(t *testing.T, upstream string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &stallProxy{ln: ln, upstream: upstream, budget: -1, changed: make(chan struct{})}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) port() int {
	_, port, _ := net.SplitHostPort(p.ln.Addr().String())
	n, _ := strconv.Atoi(port)
	return n
}

// stallAfter passes n more bytes from the server on, then holds the rest.
func (p *stallProxy) stallAfter(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.budget = n
	close(p.changed)
	p.changed = make(chan struct{})
}

// close drops every connection and stops accepting: the source is gone.
func (p *stallProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	close(p.changed)
	_ = p.ln.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

func (p *stallProxy) serve() {
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = down.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = down.Close()
			_ = up.Close()
			return
		}
		p.conns = append(p.conns, down, up)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, down) }()
		go p.forward(down, up)
	}
}

// forward copies the server's bytes to the client within the budget.
func (p *stallProxy) forward(down, up net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, ok := p.allowance(len(buf))
		if !ok {
			return
		}
		r, err := up.Read(buf[:n])
		if r > 0 {
			p.spend(int64(r))
			if _, werr := down.Write(buf[:r]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				_ = down.Close()
			}
			return
		}
	}
}

// allowance waits until some bytes may pass and says how many; false once closed.
func (p *stallProxy) allowance(max int) (int, bool) {
	for {
		p.mu.Lock()
		budget, changed, closed := p.budget, p.changed, p.closed
		p.mu.Unlock()
		switch {
		case closed:
			return 0, false
		case budget < 0:
			return max, true
		case budget > 0:
			return int(min(int64(max), budget)), true
		}
		<-changed
	}
}

func (p *stallProxy) spend(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.budget > 0 {
		p.budget = max(p.budget-n, 0)
	}
}

package ground

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// Log is a container's log as it is written, kept after its pod is gone.
type Log struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	done chan struct{}
}

// String is what the container has logged so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Lines are the logged lines that begin with prefix, without their line ends.
func (l *Log) Lines(prefix string) []string {
	var out []string
	for line := range strings.Lines(l.String()) {
		if strings.HasPrefix(line, prefix) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return out
}

// Ended is closed once the log stream ends (the container stopped or its pod went).
func (l *Log) Ended() <-chan struct{} { return l.done }

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// FollowLog streams a running container's log (kubectl logs -f) into a Log until the
// container stops or ctx ends: a pod a rollout deletes takes its log with it.
func (g *Ground) FollowLog(ctx context.Context, pod *corev1.Pod, container string) (*Log, error) {
	cs, err := kubernetes.NewForConfig(g.RESTConfig())
	if err != nil {
		return nil, err
	}
	stream, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container, Follow: true}).Stream(ctx)
	if err != nil {
		return nil, err
	}
	l := &Log{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		defer stream.Close()
		_, _ = io.Copy(l, stream)
	}()
	return l, nil
}

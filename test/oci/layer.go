package oci

import (
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// unixZero is every entry's modification time: equal inputs give equal layers.
var unixZero = time.Unix(0, 0)

// fileLayer is an uncompressed layer tar on disk: its digest is its diff ID, and its
// "compressed" bytes are the tar itself (media type ...layer.v1.tar).
type fileLayer struct {
	path string
	hash v1.Hash
	size int64
}

var _ v1.Layer = (*fileLayer)(nil)

func (l *fileLayer) Digest() (v1.Hash, error) { return l.hash, nil }
func (l *fileLayer) DiffID() (v1.Hash, error) { return l.hash, nil }
func (l *fileLayer) Size() (int64, error)     { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error) {
	return types.OCIUncompressedLayer, nil
}
func (l *fileLayer) Compressed() (io.ReadCloser, error) { return l.Uncompressed() }
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, fmt.Errorf("oci: %w", err)
	}
	return f, nil
}

// countingWriter counts what passes through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

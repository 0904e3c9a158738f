// Package objectstore keeps backups in S3-compatible object storage: streamed multipart
// uploads whose SHA-256 is computed on the way, reads, listings and deletes, every call
// bounded by its context. It knows nothing of MySQL; what a backup's objects hold is the
// backup package's business.
package objectstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// PartSize is the size of an upload's parts (S3 allows 10,000 parts: 160 GiB an object).
const PartSize = 16 << 20

// Config says which bucket, where and as whom.
type Config struct {
	// Endpoint is the store's URL (https://…); empty means AWS for Region.
	Endpoint string
	Region   string
	Bucket   string
	// PathStyle addresses the bucket in the path (endpoint/bucket/key), as most
	// S3-compatible servers want, rather than as a host name.
	PathStyle                    bool
	AccessKeyID, SecretAccessKey string
	// CABundle, PEM, replaces the system's roots for the endpoint's certificate.
	CABundle []byte
}

// Store is one bucket; keys are whole (resources.BackupKey puts a target's prefix in).
type Store struct {
	client *s3.Client
	bucket string
}

// New checks cfg and returns its store; it makes no request.
func New(cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("object store: bucket is required")
	}
	if cfg.AccessKeyID == "" || cfg.SecretAccessKey == "" {
		return nil, errors.New("object store: an access key id and a secret access key are required")
	}
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("object store: endpoint %q is not an http(s) URL", cfg.Endpoint)
		}
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = time.Minute
	if len(cfg.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CABundle) {
			return nil, errors.New("object store: the CA bundle holds no PEM certificate")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	opts := s3.Options{
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, ""),
		UsePathStyle: cfg.PathStyle,
		HTTPClient:   &http.Client{Transport: tr},
		// Checksums only where S3 requires them: not every S3-compatible server knows
		// the SDK's default CRC32 trailers. The SHA-256 we record is our own.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		RetryMaxAttempts:           3,
	}
	if cfg.Endpoint != "" {
		opts.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	return &Store{client: s3.New(opts), bucket: cfg.Bucket}, nil
}

// URL is where key is, for status and humans: s3://bucket/key.
func (s *Store) URL(key string) string {
	return "s3://" + s.bucket + "/" + key
}

// Object is what was stored.
type Object struct {
	Key    string
	Size   int64
	SHA256 string // hex
}

// Put stores r's bytes under key, in parts of PartSize, and returns their size and
// SHA-256. An upload that fails is aborted, so that no part is left behind; nothing is
// visible under key until the whole upload is complete.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (Object, error) {
	h := sha256.New()
	buf := make([]byte, PartSize)
	n, err := io.ReadFull(r, buf)
	h.Write(buf[:n])
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// One part only: a plain PUT.
		if _, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: &key,
			Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n))}); err != nil {
			return Object{}, fmt.Errorf("storing %s: %w", s.URL(key), err)
		}
		return Object{Key: key, Size: int64(n), SHA256: hex.EncodeToString(h.Sum(nil))}, nil
	}
	if err != nil {
		return Object{}, fmt.Errorf("reading what %s is to hold: %w", s.URL(key), err)
	}
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return Object{}, fmt.Errorf("storing %s: %w", s.URL(key), err)
	}
	size, err := s.putParts(ctx, key, up.UploadId, r, buf, n, h)
	if err != nil {
		// The abort has its own deadline: ctx may be what ended the upload.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, aerr := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &key, UploadId: up.UploadId}); aerr != nil {
			err = errors.Join(err, fmt.Errorf("aborting the upload: %w", aerr))
		}
		return Object{}, err
	}
	return Object{Key: key, Size: size, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// putParts uploads the first part (buf[:n], already hashed) and the rest of r, and
// completes the upload.
func (s *Store) putParts(ctx context.Context, key string, id *string, r io.Reader, buf []byte, n int, h hash.Hash) (int64, error) {
	var parts []types.CompletedPart
	size := int64(0)
	for num := int32(1); ; num++ {
		out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &s.bucket, Key: &key, UploadId: id,
			PartNumber: aws.Int32(num), Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n))})
		if err != nil {
			return 0, fmt.Errorf("storing %s, part %d: %w", s.URL(key), num, err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
		size += int64(n)
		var rerr error
		n, rerr = io.ReadFull(r, buf)
		h.Write(buf[:n])
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			if n == 0 {
				break
			}
		} else if rerr != nil {
			return 0, fmt.Errorf("reading what %s is to hold: %w", s.URL(key), rerr)
		}
	}
	if _, err := s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: &key,
		UploadId: id, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		return 0, fmt.Errorf("completing %s: %w", s.URL(key), err)
	}
	return size, nil
}

// Get opens key for reading; the caller closes it.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.URL(key), err)
	}
	return out.Body, nil
}

// Info is one listed object.
type Info struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// List returns every object whose key begins with prefix.
func (s *Store) List(ctx context.Context, prefix string) ([]Info, error) {
	var out []Info
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", s.URL(prefix), err)
		}
		for _, o := range page.Contents {
			out = append(out, Info{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), LastModified: aws.ToTime(o.LastModified)})
		}
	}
	return out, nil
}

// Delete removes the keys; one already gone is no error.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	for _, k := range keys {
		if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &k}); err != nil {
			return fmt.Errorf("deleting %s: %w", s.URL(k), err)
		}
	}
	return nil
}

// CreateBucket makes the store's bucket; one that exists and is ours is no error.
func (s *Store) CreateBucket(ctx context.Context) error {
	_, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &s.bucket})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("creating bucket %s: %w", s.bucket, err)
	}
	return nil
}

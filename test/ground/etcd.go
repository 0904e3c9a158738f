package ground

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// EtcdValue reads the bytes the API server stored under key, straight from etcd's JSON
// gateway at etcdURL: what "stored as v1beta1" means, without trusting the API server to
// say so. Custom resources are stored as JSON.
func EtcdValue(etcdURL, key string) ([]byte, error) {
	body, err := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key))})
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Post(strings.TrimSuffix(etcdURL, "/")+"/v3/kv/range", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("while reading %s from etcd: %w", key, err)
	}
	defer resp.Body.Close()
	var out struct {
		Kvs []struct {
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("while decoding etcd's answer for %s: %w", key, err)
	}
	if len(out.Kvs) != 1 {
		return nil, fmt.Errorf("etcd holds %d values under %s", len(out.Kvs), key)
	}
	return out.Kvs[0].Value, nil
}

// StoredAPIVersion is the apiVersion of the custom resource etcd holds under key.
func StoredAPIVersion(etcdURL, key string) (string, error) {
	raw, err := EtcdValue(etcdURL, key)
	if err != nil {
		return "", err
	}
	var obj struct {
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", fmt.Errorf("etcd's value under %s: %w", key, err)
	}
	return obj.APIVersion, nil
}

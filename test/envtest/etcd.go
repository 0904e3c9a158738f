package envtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// EtcdValue reads the bytes the API server stored under key, straight from etcd's JSON
// gateway at etcdURL: what "stored as v1beta1" means, without trusting the API server to
// say so. Custom resources are stored as JSON.
func EtcdValue(t testing.TB, etcdURL, key string) []byte {
	t.Helper()
	body, err := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key))})
	require.NoError(t, err)
	resp, err := http.Post(strings.TrimSuffix(etcdURL, "/")+"/v3/kv/range", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Kvs []struct {
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Len(t, out.Kvs, 1, "etcd holds %s", key)
	return out.Kvs[0].Value
}

// StoredAPIVersion is the apiVersion of the custom resource etcd holds under key.
func StoredAPIVersion(t testing.TB, etcdURL, key string) string {
	t.Helper()
	var obj struct {
		APIVersion string `json:"apiVersion"`
	}
	require.NoError(t, json.Unmarshal(EtcdValue(t, etcdURL, key), &obj))
	return obj.APIVersion
}

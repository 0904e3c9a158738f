package backup

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Failure is a failed backup's reason (one of api/v1beta1's) and what happened.
type Failure struct {
	Reason string
	Err    error
}

func (f *Failure) Error() string { return f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

// Fail gives err its reason.
func Fail(reason string, err error) error { return &Failure{Reason: reason, Err: err} }

// Result is what a backup's or restore's pod reports to the operator, in its container's
// termination message (at most 4 KiB): the manifest of a backup that completed, the
// report of a restore that did, or why it failed.
type Result struct {
	Manifest *Manifest `json:"manifest,omitempty"`
	Restored *Restored `json:"restored,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Message  string    `json:"message,omitempty"`
}

// MaxResult is the kubelet's limit on a termination message.
const MaxResult = 4096

// EncodeResult is the termination message for a run that returned m and err; a message
// too long for the limit is cut, never the reason.
func EncodeResult(m Manifest, err error, unknownReason string) []byte {
	m.Tables = nil // in the stored manifest; a termination message has no room for them
	return encode(Result{Manifest: &m}, err, unknownReason)
}

// EncodeRestored is the termination message for a restore that returned done and err.
func EncodeRestored(done Restored, err error, unknownReason string) []byte {
	return encode(Result{Restored: &done}, err, unknownReason)
}

func encode(r Result, err error, unknownReason string) []byte {
	if err != nil {
		r = Result{}
		r.Reason, r.Message = unknownReason, err.Error()
		var f *Failure
		if errors.As(err, &f) {
			r.Reason = f.Reason
		}
	}
	raw, _ := json.Marshal(r)
	for len(raw) > MaxResult && len(r.Message) > 0 {
		r.Message = r.Message[:len(r.Message)*3/4] + "…"
		raw, _ = json.Marshal(r)
	}
	return raw
}

// DecodeResult reads a termination message.
func DecodeResult(msg string) (Result, error) {
	var r Result
	if err := json.Unmarshal([]byte(msg), &r); err != nil {
		return Result{}, fmt.Errorf("the pod's report is not a result: %w", err)
	}
	if r.Manifest == nil && r.Restored == nil && r.Reason == "" {
		return Result{}, errors.New("the pod's report has neither a manifest, a restore's report nor a reason")
	}
	return r, nil
}

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

// Result is what a backup's pod reports to the operator, in its container's termination
// message (at most 4 KiB): the manifest of a backup that completed, or why it failed.
type Result struct {
	Manifest *Manifest `json:"manifest,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Message  string    `json:"message,omitempty"`
}

// MaxResult is the kubelet's limit on a termination message.
const MaxResult = 4096

// EncodeResult is the termination message for a run that returned m and err; a message
// too long for the limit is cut, never the reason.
func EncodeResult(m Manifest, err error, unknownReason string) []byte {
	r := Result{}
	if err == nil {
		r.Manifest = &m
	} else {
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
		return Result{}, fmt.Errorf("the backup pod's report is not a result: %w", err)
	}
	if r.Manifest == nil && r.Reason == "" {
		return Result{}, errors.New("the backup pod's report has neither a manifest nor a reason")
	}
	return r, nil
}

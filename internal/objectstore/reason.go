package objectstore

import (
	"context"
	"errors"
	"net"
	"syscall"

	"github.com/aws/smithy-go"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// ErrNotFound is the error of reading a key nothing is stored at.
var ErrNotFound = errors.New("no such object")

// Reason is the MySQLBackup reason for a store's error: the store could not be reached,
// refused the credentials, has no such bucket, has nothing at the key read, is full (a
// volume), or failed otherwise.
func Reason(err error) string {
	if errors.Is(err, ErrNotFound) {
		return mysqlv1beta1.ReasonBackupDataMissing
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden", "InvalidToken", "ExpiredToken":
			return mysqlv1beta1.ReasonStorageAccessDenied
		case "NoSuchBucket":
			return mysqlv1beta1.ReasonStorageBucketNotFound
		case "NoSuchKey", "NotFound":
			return mysqlv1beta1.ReasonBackupDataMissing
		}
		return mysqlv1beta1.ReasonStorageFailed
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return mysqlv1beta1.ReasonStorageFull
	}
	var nerr net.Error
	if errors.As(err, &nerr) || errors.Is(err, context.DeadlineExceeded) {
		return mysqlv1beta1.ReasonStorageUnreachable
	}
	return mysqlv1beta1.ReasonStorageFailed
}

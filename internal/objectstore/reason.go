package objectstore

import (
	"context"
	"errors"
	"net"

	"github.com/aws/smithy-go"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// Reason is the MySQLBackup reason for a store's error: the store could not be reached,
// refused the credentials, has no such bucket, or failed otherwise.
func Reason(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden", "InvalidToken", "ExpiredToken":
			return mysqlv1beta1.ReasonStorageAccessDenied
		case "NoSuchBucket":
			return mysqlv1beta1.ReasonStorageBucketNotFound
		}
		return mysqlv1beta1.ReasonStorageFailed
	}
	var nerr net.Error
	if errors.As(err, &nerr) || errors.Is(err, context.DeadlineExceeded) {
		return mysqlv1beta1.ReasonStorageUnreachable
	}
	return mysqlv1beta1.ReasonStorageFailed
}

// Package tests holds Dolphin's own scorecard tests. Each returns a scorecard v1alpha3
// TestResult; the dolphin-scorecard-tests binary runs one by name and prints its
// TestStatus, which is what scorecard expects of a test image. They read the bundle from
// the folder scorecard mounts (/bundle) and reach the cluster the way a pod does.
package tests

package v1alpha1_test

import (
	"math/rand"
	"os"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/dump"
	"sigs.k8s.io/randfill"

	mysqlv1alpha1 "github.com/dolphin-operator/dolphin/api/v1alpha1"
	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// filler makes random objects: metafuzzer's functions keep metadata, times (whole
// seconds, as JSON carries them) and quantities valid.
func filler(seed int64) *randfill.Filler {
	scheme := runtime.NewScheme()
	return fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), serializer.NewCodecFactory(scheme)).
		NilChance(0.3).NumElements(0, 3)
}

// roundTrips checks both directions for one seed and reports the first difference.
func roundTrips(t *testing.T, seed int64) {
	f := filler(seed)
	t.Helper()

	// v1alpha1 -> v1beta1 -> v1alpha1
	for range 3 {
		spoke := &mysqlv1alpha1.MySQLCluster{}
		f.Fill(spoke)
		spoke.TypeMeta = mysqlv1alpha1.MySQLCluster{}.TypeMeta
		delete(spoke.Annotations, mysqlv1alpha1.AnnotationHubData)
		hub := &mysqlv1beta1.MySQLCluster{}
		if err := spoke.ConvertTo(hub); err != nil {
			t.Fatalf("seed %d: ConvertTo: %v", seed, err)
		}
		back := &mysqlv1alpha1.MySQLCluster{}
		if err := back.ConvertFrom(hub); err != nil {
			t.Fatalf("seed %d: ConvertFrom: %v", seed, err)
		}
		if !equality.Semantic.DeepEqual(spoke, back) {
			t.Fatalf("seed %d: v1alpha1 MySQLCluster changed through v1beta1:\n%s", seed, diff(spoke, back))
		}

		bspoke := &mysqlv1alpha1.MySQLBackup{}
		f.Fill(bspoke)
		delete(bspoke.Annotations, mysqlv1alpha1.AnnotationHubData)
		bhub := &mysqlv1beta1.MySQLBackup{}
		if err := bspoke.ConvertTo(bhub); err != nil {
			t.Fatalf("seed %d: backup ConvertTo: %v", seed, err)
		}
		bback := &mysqlv1alpha1.MySQLBackup{}
		if err := bback.ConvertFrom(bhub); err != nil {
			t.Fatalf("seed %d: backup ConvertFrom: %v", seed, err)
		}
		if !equality.Semantic.DeepEqual(bspoke, bback) {
			t.Fatalf("seed %d: v1alpha1 MySQLBackup changed through v1beta1:\n%s", seed, diff(bspoke, bback))
		}
	}

	// v1beta1 -> v1alpha1 -> v1beta1
	for range 3 {
		hub := &mysqlv1beta1.MySQLCluster{}
		f.Fill(hub)
		delete(hub.Annotations, mysqlv1alpha1.AnnotationHubData)
		spoke := &mysqlv1alpha1.MySQLCluster{}
		if err := spoke.ConvertFrom(hub); err != nil {
			t.Fatalf("seed %d: ConvertFrom: %v", seed, err)
		}
		back := &mysqlv1beta1.MySQLCluster{}
		if err := spoke.ConvertTo(back); err != nil {
			t.Fatalf("seed %d: ConvertTo: %v", seed, err)
		}
		if !equality.Semantic.DeepEqual(hub, back) {
			t.Fatalf("seed %d: v1beta1 MySQLCluster changed through v1alpha1:\n%s", seed, diff(hub, back))
		}

		bhub := &mysqlv1beta1.MySQLBackup{}
		f.Fill(bhub)
		delete(bhub.Annotations, mysqlv1alpha1.AnnotationHubData)
		bspoke := &mysqlv1alpha1.MySQLBackup{}
		if err := bspoke.ConvertFrom(bhub); err != nil {
			t.Fatalf("seed %d: backup ConvertFrom: %v", seed, err)
		}
		bback := &mysqlv1beta1.MySQLBackup{}
		if err := bspoke.ConvertTo(bback); err != nil {
			t.Fatalf("seed %d: backup ConvertTo: %v", seed, err)
		}
		if !equality.Semantic.DeepEqual(bhub, bback) {
			t.Fatalf("seed %d: v1beta1 MySQLBackup changed through v1alpha1:\n%s", seed, diff(bhub, bback))
		}
	}
}

func diff(a, b any) string { return "want: " + dump.Pretty(a) + "\ngot:  " + dump.Pretty(b) }

// TestRandomRoundTrips converts many random objects both ways. CONVERSION_ROUNDS sets how
// many (default 500); the seeds are logged so a failure can be replayed.
func TestRandomRoundTrips(t *testing.T) {
	rounds := 500
	if v, err := strconv.Atoi(os.Getenv("CONVERSION_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	base := rand.Int63()
	t.Logf("seeds %d to %d", base, base+int64(rounds)-1)
	for k := range rounds {
		roundTrips(t, base+int64(k))
	}
}

// FuzzRoundTrip is the coverage-guided version: `go test -fuzz FuzzRoundTrip ./api/v1alpha1`.
// Its seed corpus (testdata/fuzz/FuzzRoundTrip) runs with every `go test`.
func FuzzRoundTrip(f *testing.F) {
	f.Add(int64(1))
	f.Fuzz(func(t *testing.T, seed int64) { roundTrips(t, seed) })
}

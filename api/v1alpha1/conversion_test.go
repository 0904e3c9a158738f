package v1alpha1_test

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
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

// object is what both versions of both kinds are.
type object interface {
	runtime.Object
	metav1.Object
}

// spoke is a v1alpha1 object.
type spoke interface {
	object
	conversion.Convertible
}

// hub is a v1beta1 object.
type hub interface {
	object
	conversion.Hub
}

// roundTrips checks both directions for both kinds for one seed.
func roundTrips(t *testing.T, seed int64) {
	t.Helper()
	f := filler(seed)
	for range 3 {
		viaHub(t, f, seed, &mysqlv1alpha1.MySQLCluster{}, &mysqlv1beta1.MySQLCluster{}, &mysqlv1alpha1.MySQLCluster{})
		viaHub(t, f, seed, &mysqlv1alpha1.MySQLBackup{}, &mysqlv1beta1.MySQLBackup{}, &mysqlv1alpha1.MySQLBackup{})
		viaSpoke(t, f, seed, &mysqlv1beta1.MySQLCluster{}, &mysqlv1alpha1.MySQLCluster{}, &mysqlv1beta1.MySQLCluster{})
		viaSpoke(t, f, seed, &mysqlv1beta1.MySQLBackup{}, &mysqlv1alpha1.MySQLBackup{}, &mysqlv1beta1.MySQLBackup{})
	}
}

// viaHub fills in with random data and checks that in -> hub -> back changes nothing.
func viaHub(t *testing.T, f *randfill.Filler, seed int64, in spoke, h hub, back spoke) {
	t.Helper()
	fill(f, in)
	if err := in.ConvertTo(h); err != nil {
		t.Fatalf("seed %d: %T.ConvertTo: %v", seed, in, err)
	}
	if err := back.ConvertFrom(h); err != nil {
		t.Fatalf("seed %d: %T.ConvertFrom: %v", seed, back, err)
	}
	if !equality.Semantic.DeepEqual(in, back) {
		t.Fatalf("seed %d: v1alpha1 %T changed through v1beta1:\n%s", seed, in, diff(in, back))
	}
}

// viaSpoke fills in with random data and checks that in -> spoke -> back changes nothing.
func viaSpoke(t *testing.T, f *randfill.Filler, seed int64, in hub, s spoke, back hub) {
	t.Helper()
	fill(f, in)
	if err := s.ConvertFrom(in); err != nil {
		t.Fatalf("seed %d: %T.ConvertFrom: %v", seed, s, err)
	}
	if err := s.ConvertTo(back); err != nil {
		t.Fatalf("seed %d: %T.ConvertTo: %v", seed, s, err)
	}
	if !equality.Semantic.DeepEqual(in, back) {
		t.Fatalf("seed %d: v1beta1 %T changed through v1alpha1:\n%s", seed, in, diff(in, back))
	}
}

// fill randomises o; the conversion annotation is never user data.
func fill(f *randfill.Filler, o object) {
	f.Fill(o)
	a := o.GetAnnotations()
	delete(a, mysqlv1alpha1.AnnotationHubData)
	o.SetAnnotations(a)
}

func diff(a, b any) string { return fmt.Sprintf("want: %+v\ngot:  %+v", a, b) }

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

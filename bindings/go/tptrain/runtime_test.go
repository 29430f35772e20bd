package tptrain

import (
	"strings"
	"testing"
)

func TestBuildInfo(t *testing.T) {
	info := BuildInfo()
	if !strings.Contains(info, "tptrain "+VersionString()) {
		t.Errorf("BuildInfo() does not name tptrain %s:\n%s", VersionString(), info)
	}
	if !strings.Contains(info, "LibTorch") {
		t.Errorf("BuildInfo() does not name LibTorch:\n%s", info)
	}
}

func TestHasFeature(t *testing.T) {
	for _, f := range []Feature{FeatureGloo, FeatureCUDA, FeatureNCCL} {
		t.Logf("%v: %v", f, HasFeature(f))
	}
	if HasFeature(Feature(4242)) {
		t.Error("an unknown feature is reported available")
	}
	if got := Feature(4242).String(); got != "Feature(4242)" {
		t.Errorf("Feature(4242).String() = %q", got)
	}
}

func TestNumThreads(t *testing.T) {
	before, err := NumThreads()
	if err != nil {
		t.Fatal(err)
	}
	if before < 1 {
		t.Fatalf("NumThreads() = %d", before)
	}
	defer func() {
		if err := SetNumThreads(before); err != nil {
			t.Error(err)
		}
	}()
	if err := SetNumThreads(2); err != nil {
		t.Fatal(err)
	}
	if n, err := NumThreads(); err != nil || n != 2 {
		t.Errorf("after SetNumThreads(2): NumThreads() = %d, %v", n, err)
	}
	wantError(t, SetNumThreads(-3), CodeInvalidArgument, "num_threads must be >= 1")
	if n, err := NumThreads(); err != nil || n != 2 {
		t.Errorf("a rejected SetNumThreads changed the count: %d, %v", n, err)
	}
}

func TestSetNumThreadsOverflow(t *testing.T) {
	if ^uint(0)>>32 == 0 {
		t.Skip("int is 32 bits")
	}
	var big64 int64 = 1 << 40
	big := int(big64)
	wantError(t, SetNumThreads(big), CodeInvalidArgument, "does not fit a C int")
}

package tptrain

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// wantError checks that err is an *Error with the given code whose message
// contains substr, and returns it.
func wantError(t *testing.T, err error, code Code, substr string) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v containing %q", code, substr)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %T %v, want *tptrain.Error", err, err)
	}
	if e.Code != code {
		t.Errorf("code = %v, want %v (message %q)", e.Code, code, e.Message)
	}
	if !strings.Contains(e.Message, substr) {
		t.Errorf("message = %q, want it to contain %q", e.Message, substr)
	}
	return e
}

func TestVersion(t *testing.T) {
	if got := Version(); got != VersionNumber {
		t.Errorf("Version() = %d, header says %d", got, VersionNumber)
	}
	if got, want := VersionString(), fmt.Sprintf("%d.%d.%d", VersionMajor, VersionMinor, VersionPatch); got != want {
		t.Errorf("VersionString() = %q, want %q", got, want)
	}
	if got := ABIVersion(); got != ABI {
		t.Errorf("ABIVersion() = %d, header says %d", got, ABI)
	}
	if Version()/10000 != VersionMajor {
		t.Errorf("library major %d != header major %d", Version()/10000, VersionMajor)
	}
	if err := CheckVersion(); err != nil {
		t.Errorf("CheckVersion() = %v", err)
	}
}

func TestCheckVersionRejects(t *testing.T) {
	cases := []struct {
		name         string
		version, abi uint32
		want         string
	}{
		{"other ABI", VersionNumber, ABI + 1, "ABI version"},
		{"other major", VersionNumber + 10000, ABI, "major version"},
		{"older library", VersionNumber - 1, ABI, "older than the header"},
	}
	if VersionNumber == 0 {
		cases = cases[:2]
	}
	for _, c := range cases {
		err := checkVersion(c.version, c.abi)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: checkVersion(%d, %d) = %v, want an error about %q", c.name, c.version, c.abi, err, c.want)
		}
	}
	if err := checkVersion(VersionNumber+1, ABI); err != nil {
		t.Errorf("a newer patch release is compatible, got %v", err)
	}
}

package source

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as the render worker of the tests
// that render through one (it is re-executed by them).
func TestMain(m *testing.M) {
	RunWorkerIfAsked()
	os.Exit(m.Run())
}

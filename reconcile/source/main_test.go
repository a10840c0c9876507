package source

import (
	"os"
	"testing"

	"recond.dev/recond/reconcile/source/renderer"
)

// TestMain lets the test binary serve as the render binary of the tests
// that render through one (it is re-executed by them).
func TestMain(m *testing.M) {
	renderer.RunIfAsked(testBuild)
	os.Exit(m.Run())
}

// testBuild is the build the test binary answers with as a render binary.
const testBuild = "test"

// inProcess renders in the test's own process: what a nil *Worker stood
// for before every render ran in the render binary.
var inProcess Renderer = renderer.InProcess{}

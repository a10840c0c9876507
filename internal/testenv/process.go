package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// startProcess runs bin with args, logging to a file in a temporary
// directory, polls ready until it returns nil (60 s at most), and kills the
// process when the test ends. It fails the test, showing the log, if the
// process exits or never becomes ready.
func startProcess(t testing.TB, bin string, args []string, ready func() error) {
	t.Helper()
	logf, err := os.Create(filepath.Join(t.TempDir(), filepath.Base(bin)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logf.Close()
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := ready()
		if err == nil {
			return
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("%s exited:\n%s", bin, b)
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("%s not ready after 60s (%v):\n%s", bin, err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

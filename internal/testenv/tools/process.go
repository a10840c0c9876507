package tools

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Start runs bin with args, logging to a file in a temporary directory,
// polls ready until it returns nil (60 s at most), and kills the process
// when the test ends. It fails the test, showing the log, if the process
// exits or never becomes ready.
func Start(t testing.TB, bin string, args []string, ready func() error) {
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

// FreePorts returns n TCP ports of 127.0.0.1 that were free a moment ago,
// for a process that must be told its ports.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// Relisten listens on addr again (a server's own, just closed), retrying
// for 5 s while it is still taken. Go's listeners set SO_REUSEADDR, so the
// address is free at once after a close in most cases.
func Relisten(addr string) (net.Listener, error) {
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, err
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
)

// asCapArgs carries the arguments of the sync that
// TestSyncUnderAddressSpaceCap runs in a process of its own.
const asCapArgs = "_RECOND_TEST_AS_CAP_ARGS"

// recond sync started under an address-space cap (`prlimit
// --as=2000000000`, as systemd's LimitAS= or a shell's ulimit -v set it),
// lower than what its render worker asks for, renders a kustomization
// through the worker and applies it: the worker takes the lower of the
// cap and its own limit. The sync runs in a process of its own (this test
// binary, re-executed under prlimit from util-linux, without
// CAP_SYS_RESOURCE, which would let root raise the cap).
func TestSyncUnderAddressSpaceCap(t *testing.T) {
	if js := os.Getenv(asCapArgs); js != "" {
		// The process under the cap.
		var args []string
		if err := json.Unmarshal([]byte(js), &args); err != nil {
			t.Fatal(err)
		}
		if code, _, _ := recond(t, args...); code != 0 {
			t.Fatalf("sync under the cap: exit %d", code)
		}
		return
	}
	if raceEnabled {
		t.Skip("the race detector cannot run under an address-space cap of this size")
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) is not installed")
	}
	repo := testenv.NewRepo(t)
	repo.Commit("kustomization", map[string]string{
		"app/kustomization.yaml": "resources:\n- cm.yaml\nnamePrefix: p-\n",
		"app/cm.yaml":            cmYAML,
	})
	args := append([]string{"sync"}, clusterArgs(t, repo.URL())...)
	ns := args[4]
	// A worker memory far above the cap, so that the worker's own limit is
	// above it whatever it has mapped when it starts.
	args = append(args, "--path", "app", "--render-max-memory", "8589934592")
	js, _ := json.Marshal(args)

	cmd := []string{prlimit, "--as=2000000000", "--"}
	if setpriv, err := exec.LookPath("setpriv"); err == nil {
		cmd = append(cmd, setpriv, "--bounding-set=-sys_resource", "--inh-caps=-sys_resource", "--")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd = append(cmd, exe, "-test.run=^TestSyncUnderAddressSpaceCap$", "-test.short", "-test.count=1", "-test.v")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.Env = append(os.Environ(), asCapArgs+"="+string(js))
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err = c.Run()
	t.Logf("%s\n%s", strings.Join(cmd, " "), out.String())
	if err != nil {
		t.Fatalf("sync under an address-space cap: %v", err)
	}
	if strings.Contains(out.String(), "setrlimit") {
		t.Error("the log speaks of setrlimit")
	}
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "p-c", metav1.GetOptions{})
	if err != nil || cm.Data["k"] != "v" {
		t.Fatalf("the kustomization's ConfigMap: %v", err)
	}
}
